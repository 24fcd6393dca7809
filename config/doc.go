// Package config reads meshless's YAML configuration: one document per
// client that says, per service and per method (gRPC) or per host and per
// route (HTTP), which circuit breaker, retry or hedging, bulkhead, rate
// limiter, adaptive throttler and timeouts its calls run through.
//
// It decodes strictly, with an error for every problem that names its path
// and line; resolves each method's settings level by level (built-in
// defaults → defaults → service → method, field by field); and maps them onto
// each policy package's typed Config ([Config.Method]). It builds no
// policy: the transports (grpcmw, httpmw) do, through their engine.
//
//	cfg, err := config.Parse(yamlBytes)
//	if err != nil {
//		return err // services."payment.PaymentService".retry.maxAttempts: must be in [1, 100] …
//	}
//	m := cfg.Method("payment.PaymentService", "Charge")
//	// m.Breaker, m.Retry, m.Bulkhead, …: typed configs, nil when off
//
// The built-in defaults are each policy package's DefaultConfig, except
// where the YAML's default differs on purpose, each named with its reason
// ([FailureRateThreshold], …); docs/configuration.md lists every key.
//
// Most programs use grpcmw.ParseConfig or grpcmw.LoadConfig, which add the
// gRPC-specific checks (service names against the protobuf descriptors
// linked into the program, the outlierDetection section) through a [Check].
package config
