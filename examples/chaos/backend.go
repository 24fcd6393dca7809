// This file holds the backend: a gRPC server (grpc.testing.TestService over
// loopback TCP) whose behaviour the schedule moves from healthy to
// overloaded, failing, hanging and back; and the schedule itself.

package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// behaviour is how the backend answers during a phase.
type behaviour int32

const (
	healthy    behaviour = iota // answers after a short latency
	overloaded                  // answers slowly, and fails one request in ShedEvery with UNAVAILABLE
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

// The backend's answers that are not OK.
const (
	msgNotFound   = "no such item"
	msgOverloaded = "overloaded, try again"
	msgDown       = "backend down"
)

// backend is one gRPC server. Its UnaryCall answers as the current behaviour
// says; a request whose response_status asks for NOT_FOUND is a lookup of an
// item that does not exist, answered NOT_FOUND by a backend that is up. It is
// safe for concurrent use.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	latency, slow time.Duration
	shedEvery     int64
	mode          atomic.Int32 // a behaviour
	received      atomic.Int64
	inflight      atomic.Int64
	peak          atomic.Int64
	srv           *grpc.Server
	target        string            // for grpc.NewClient
	dialOpts      []grpc.DialOption // what reaching target needs
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

// startBackend starts a backend on a listener from listen.
func startBackend(listen listenFunc, latency, slow time.Duration, shedEvery int) (*backend, error) {
	lis, target, opts, err := listen()
	if err != nil {
		return nil, err
	}
	b := &backend{latency: latency, slow: slow, shedEvery: int64(shedEvery), srv: grpc.NewServer(), target: target, dialOpts: opts}
	testgrpc.RegisterTestServiceServer(b.srv, b)
	go b.srv.Serve(lis) //nolint:errcheck // Serve returns once stop is called
	return b, nil
}

// set changes how the backend answers the requests that arrive from now on.
func (b *backend) set(bh behaviour) { b.mode.Store(int32(bh)) }

// stop ends the server and every call still open on it.
func (b *backend) stop() { b.srv.Stop() }

// UnaryCall is the one method the clients call.
func (b *backend) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	n := b.received.Add(1)
	in := b.inflight.Add(1)
	defer b.inflight.Add(-1)
	for p := b.peak.Load(); in > p && !b.peak.CompareAndSwap(p, in); p = b.peak.Load() {
	}
	switch behaviour(b.mode.Load()) {
	case failing:
		return nil, status.Error(codes.Unavailable, msgDown)
	case hanging:
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case overloaded:
		if err := sleep(ctx, b.slow); err != nil {
			return nil, err
		}
		if n%b.shedEvery == 0 {
			return nil, status.Error(codes.Unavailable, msgOverloaded)
		}
	default:
		if err := sleep(ctx, b.latency); err != nil {
			return nil, err
		}
	}
	if codes.Code(req.GetResponseStatus().GetCode()) == codes.NotFound {
		return nil, status.Error(codes.NotFound, msgNotFound)
	}
	return &testgrpc.SimpleResponse{}, nil
}

// sleep waits d, or returns the status of ctx's end.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
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
	Behaviour behaviour
	Duration  time.Duration
}

func (p phase) String() string { return p.Behaviour.String() }

// describe says, for the story, what the backend does in the phase.
func (p phase) describe(cfg config) string {
	switch p.Behaviour {
	case healthy:
		return fmt.Sprintf("the backend answers in %v", cfg.Latency)
	case overloaded:
		return fmt.Sprintf("the backend answers in %v, and one request in %d fails with UNAVAILABLE", cfg.Overloaded, cfg.ShedEvery)
	case failing:
		return "the backend answers UNAVAILABLE at once"
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

// lengthOf is how long the schedule has the backend behave as b.
func (s schedule) lengthOf(b behaviour) time.Duration {
	var d time.Duration
	for _, p := range s {
		if p.Behaviour == b {
			d += p.Duration
		}
	}
	return d
}
