// Package grpcmw turns one YAML file into a gRPC client's resilience:
// circuit breakers, retries, bulkheads and timeouts, per service and per
// method, as unary and stream client interceptors.
//
//	cfg, err := grpcmw.LoadConfig("resilience.yaml")
//	...
//
// This release reads and validates the configuration; the interceptors
// follow.
package grpcmw
