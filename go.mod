module github.com/meshless/meshless

go 1.25.0

require (
	github.com/failsafe-go/failsafe-go v0.9.4
	go.uber.org/goleak v1.1.10
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	golang.org/x/lint v0.0.0-20190930215403-16217165b5de // indirect
	golang.org/x/tools v0.0.0-20191108193012-7d206e10da11 // indirect
)
