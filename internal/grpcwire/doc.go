// Package grpcwire puts meshless's own rejections on the gRPC wire and reads
// them back: a status whose google.rpc.ErrorInfo, in meshless's domain,
// carries a reason that a [resilience.Kind] names. Package grpcmw and the
// outlier balancer share it, so that both read a relayed rejection alike.
// It also reads a server's pushback trailer (gRFC A6) and gives a context's
// end the status gRPC gives it, for grpcmw's calls and streams.
package grpcwire
