// This file holds the backend: a gRPC server (grpc.testing.TestService over
// loopback TCP), or with -transport http an HTTP server answering the same
// way, of fixed capacity, whose behaviour the schedule moves from healthy to
// overloaded, failing, hanging and back; and the schedule itself.

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// behaviour is how the backend answers during a phase.
type behaviour int32

const (
	healthy    behaviour = iota // serves calls with its workers, at the normal rate
	overloaded                  // the same backend, offered more calls than its workers serve
	failing                     // answers UNAVAILABLE at once
	hanging                     // never answers: the call waits for its deadline
)

func (b behaviour) String() string {
	switch b {
	case healthy:
		return "healthy"
	case overloaded:
		return "overloaded"
	case failing:
		return "failing"
	case hanging:
		return "hanging"
	}
	return fmt.Sprintf("behaviour(%d)", int32(b))
}

// How a backend sheds the calls its queue has no room for.
const (
	shedUnavailable = "unavailable" // UNAVAILABLE
	shedPushback    = "pushback"    // RESOURCE_EXHAUSTED, with a grpc-retry-pushback-ms trailer
)

// The backend's answers that are not OK.
const (
	msgNotFound   = "no such item"
	msgOverloaded = "overloaded, try again"
	msgDown       = "backend down"
	msgFlaky      = "flaky backend"
)

// capacity is what a backend can serve: Workers calls at a time, each
// taking a worker for Work; Queue more wait for a worker, in order; the
// backend sheds the calls beyond. Latency grows with the queue.
type capacity struct {
	Workers int
	Work    time.Duration
	Queue   int
	Shed    string // shedUnavailable or shedPushback
	// FailEvery > 0 makes the backend fail one request in FailEvery that it
	// serves with UNAVAILABLE, after the work: a flaky backend.
	FailEvery int
}

// perSecond is the calls a second the workers serve at most.
func (c capacity) perSecond() float64 {
	return float64(c.Workers) * float64(time.Second) / float64(c.Work)
}

// pushback is what a shed call is asked to wait: the time the workers take
// to drain a full queue.
func (c capacity) pushback() time.Duration {
	return c.Work * time.Duration((c.Queue+c.Workers-1)/c.Workers)
}

// backend is one gRPC server. Its UnaryCall answers as the current behaviour
// says; a request whose response_status asks for NOT_FOUND is a lookup of an
// item that does not exist, answered NOT_FOUND by a backend that is up. It is
// safe for concurrent use.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	cap      capacity
	admitted chan struct{} // a token per call admitted: queued or at work
	workers  chan struct{} // a token per call at work
	mode     atomic.Int32  // a behaviour
	received atomic.Int64
	shed     atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
	srv      *grpc.Server                                                      // or nil, with -transport http
	target   string                                                            // for grpc.NewClient
	dialOpts []grpc.DialOption                                                 // what reaching target needs
	httpSrv  *http.Server                                                      // with -transport http, or nil
	dial     func(ctx context.Context, network, addr string) (net.Conn, error) // reaches httpSrv
}

// listenFunc starts a listener for a backend and says how a client reaches
// it: the target to dial and the dial options that need.
type listenFunc func() (lis net.Listener, target string, opts []grpc.DialOption, err error)

// listenTCP listens on a free loopback port: what the program does.
func listenTCP() (net.Listener, string, []grpc.DialOption, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	return lis, lis.Addr().String(), nil, nil
}

// startBackend starts a backend of capacity c on a listener from listen,
// serving gRPC, or HTTP when transport is "http".
func startBackend(listen listenFunc, c capacity, transport string) (*backend, error) {
	lis, target, opts, err := listen()
	if err != nil {
		return nil, err
	}
	b := &backend{
		cap:      c,
		admitted: make(chan struct{}, c.Workers+c.Queue),
		workers:  make(chan struct{}, c.Workers),
		target:   target,
		dialOpts: opts,
	}
	if transport == transportHTTP {
		b.httpSrv, b.dial = &http.Server{Handler: b}, dialerOf(lis)
		go b.httpSrv.Serve(lis) //nolint:errcheck // Serve returns once stop is called
		return b, nil
	}
	b.srv = grpc.NewServer()
	testgrpc.RegisterTestServiceServer(b.srv, b)
	go b.srv.Serve(lis) //nolint:errcheck // Serve returns once stop is called
	return b, nil
}

// dialerOf returns how an HTTP client reaches lis, whatever the request's
// host: an in-memory listener's own dial (the tests'), or its TCP address.
func dialerOf(lis net.Listener) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d, ok := lis.(interface {
		DialContext(context.Context) (net.Conn, error)
	}); ok {
		return func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx) }
	}
	addr := lis.Addr().String()
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// set changes how the backend answers the requests that arrive from now on.
func (b *backend) set(bh behaviour) { b.mode.Store(int32(bh)) }

// stop ends the server and every call still open on it.
func (b *backend) stop() {
	if b.httpSrv != nil {
		_ = b.httpSrv.Close()
		return
	}
	b.srv.Stop()
}

// arrive counts a request that arrives, and one more in flight (the caller
// takes it off when it is answered); it returns the request's number.
func (b *backend) arrive() int64 {
	n := b.received.Add(1)
	in := b.inflight.Add(1)
	for p := b.peak.Load(); in > p && !b.peak.CompareAndSwap(p, in); p = b.peak.Load() {
	}
	return n
}

// UnaryCall is the one method the clients call.
func (b *backend) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	n := b.arrive()
	defer b.inflight.Add(-1)
	switch behaviour(b.mode.Load()) {
	case failing:
		return nil, status.Error(codes.Unavailable, msgDown)
	case hanging:
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := b.serve(ctx); err != nil {
		return nil, err
	}
	if f := int64(b.cap.FailEvery); f > 0 && n%f == 0 {
		return nil, status.Error(codes.Unavailable, msgFlaky)
	}
	if codes.Code(req.GetResponseStatus().GetCode()) == codes.NotFound {
		return nil, status.Error(codes.NotFound, msgNotFound)
	}
	return &testgrpc.SimpleResponse{}, nil
}

// serve admits the call into the queue or sheds it, waits for a worker, and
// holds the worker for the call's work. A call whose caller gives up leaves
// the queue, but once at work it holds its worker to the end, as real work
// does.
func (b *backend) serve(ctx context.Context) error {
	select {
	case b.admitted <- struct{}{}:
	default:
		b.shed.Add(1)
		if b.cap.Shed == shedPushback {
			grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", strconv.FormatInt(b.cap.pushback().Milliseconds(), 10))) //nolint:errcheck // a trailer is best effort
			return status.Error(codes.ResourceExhausted, msgOverloaded)
		}
		return status.Error(codes.Unavailable, msgOverloaded)
	}
	defer func() { <-b.admitted }()
	select {
	case b.workers <- struct{}{}:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-b.workers }()
	t := time.NewTimer(b.cap.Work)
	defer t.Stop()
	<-t.C
	return status.FromContextError(ctx.Err()).Err() // nil while the caller waits
}

// request returns the n-th request of the run; both clients send the same
// ones. Every other one looks up an item that does not exist.
func request(n int64) *testgrpc.SimpleRequest {
	if n%2 == 1 {
		return &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.NotFound)}}
	}
	return &testgrpc.SimpleRequest{}
}

// phase is one step of the chaos schedule.
type phase struct {
	Name      string
	Behaviour behaviour
	Duration  time.Duration
}

func (p phase) String() string { return p.Name }

// describe says, for the story, what the backend does in the phase.
func (p phase) describe(cfg config) string {
	c := cfg.Capacity
	switch p.Behaviour {
	case healthy:
		return fmt.Sprintf("%d calls a second; the backend's %d workers take %v a call (%.0f calls a second at most), %d more calls wait in its queue",
			cfg.Rate, c.Workers, c.Work, c.perSecond(), c.Queue)
	case overloaded:
		shed := cfg.unavailable()
		switch {
		case c.Shed == shedPushback && cfg.Transport == transportHTTP:
			shed = fmt.Sprintf("429 with Retry-After %v", max(time.Second, c.pushback().Round(time.Second)))
		case c.Shed == shedPushback:
			shed = fmt.Sprintf("RESOURCE_EXHAUSTED, pushback %v", c.pushback())
		}
		return fmt.Sprintf("%.0f calls a second, %gx what the backend serves: calls queue, and beyond %d queued it sheds them (%s)",
			cfg.rate(p), cfg.Load, c.Queue, shed)
	case failing:
		return "the backend answers " + cfg.unavailable() + " at once"
	case hanging:
		return "the backend accepts calls and never answers"
	}
	return ""
}

// schedule is the sequence of phases, run one after the other.
type schedule []phase

// at returns the index of the phase that runs at elapsed since the start, or
// len(s) once the schedule is over. Phases of zero length are skipped.
func (s schedule) at(elapsed time.Duration) int {
	var end time.Duration
	for i, p := range s {
		end += p.Duration
		if elapsed < end {
			return i
		}
	}
	return len(s)
}

// total is the length of the whole schedule.
func (s schedule) total() time.Duration {
	var d time.Duration
	for _, p := range s {
		d += p.Duration
	}
	return d
}

// start is when phase i starts, since the start of the schedule.
func (s schedule) start(i int) time.Duration {
	var d time.Duration
	for _, p := range s[:i] {
		d += p.Duration
	}
	return d
}
