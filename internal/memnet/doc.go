// Package memnet is an in-memory network for tests that run inside a
// testing/synctest bubble: a listener whose connections are [net.Pipe]s.
// A goroutine blocked on one is durably blocked, as one blocked on a socket
// is not, so the bubble's fake time can advance; and a connection arms no
// timer until a deadline is set on it.
//
// Not grpc-go's bufconn: each bufconn connection arms two timers of 0 s,
// which in a bubble the runtime runs at once, on the system stack; under
// the race detector (Go 1.26.8) that crashed a test binary now and then, in
// the race runtime. And net/http's server clears a past read deadline that
// a bufconn timer can still act on, cancelling the next request.
//
//	lis := memnet.Listen()
//	go srv.Serve(lis)
//	conn, err := grpc.NewClient("passthrough:///mem", grpc.WithContextDialer(lis.Dialer()), …)
package memnet
