// Package grpchedge is the hedged server-streaming call of grpcmw's stream
// client interceptor (docs/hedging.md, "Server-streaming calls"), and the
// call options every hedged copy gets, a unary one's too. Package grpcmw
// is its only user; its errors name grpcmw, as they did there.
package grpchedge
