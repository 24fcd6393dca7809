module github.com/meshless/meshless/bench

go 1.25.0

replace github.com/meshless/meshless => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/meshless/meshless v0.0.0
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
)
