// Package pushback carries the delay a server asked for (gRPC's
// grpc-retry-pushback-ms trailer, HTTP's Retry-After) with an attempt's
// error, from the transport that read it to the engine's retry and hedging
// policies, which take it off before the caller sees the error.
package pushback
