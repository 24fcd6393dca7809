module github.com/meshless/meshless/dashboard

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22

require go.uber.org/goleak v1.3.0
