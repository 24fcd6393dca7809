package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// countingClock is the system clock, counting its reads.
type countingClock struct {
	resilience.Clock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Clock.Now() }

// RealTime says the readings are real time, as the system clock's: the
// engine then uses them for context deadlines too.
func (c *countingClock) RealTime() bool { return true }

// interceptOnce runs one unary call through the chain's interceptor on an
// invoker that answers at once.
func interceptOnce(t testing.TB, icpt grpc.UnaryClientInterceptor, ctx context.Context) {
	err := icpt(ctx, "/grpc.testing.TestService/UnaryCall", &testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 24 item 2 (B15): on defaults, a call that succeeds at its first
// attempt reads the clock twice — when it begins (its attempt's start) and
// when the attempt ends — and every stage (breaker, throttler, bulkhead,
// timeouts, the call's duration) takes those times; no stage reads
// time.Now, Since or Until of its own on this path. Before, it read the
// clock 4 times, and time.Now, Since and Until 6 more (the issue counted
// 10).
func TestACallReadsTheClockTwice(t *testing.T) {
	clk := &countingClock{Clock: resilience.SystemClock()}
	chain, err := grpcmw.New(nil, grpcmw.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	icpt := chain.UnaryClientInterceptor()
	interceptOnce(t, icpt, t.Context()) // builds the method's policies
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }},
		{"a later deadline", func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), time.Hour) }},
		{"an earlier deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 500*time.Millisecond)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			before := clk.reads.Load()
			interceptOnce(t, icpt, ctx)
			n := clk.reads.Load() - before
			t.Logf("%d clock reads", n)
			if n > 2 {
				t.Fatalf("one call read the clock %d times, want at most 2", n)
			}
		})
	}
}

func BenchmarkInterceptorOnDefaults(b *testing.B) {
	chain, err := grpcmw.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer chain.Close()
	icpt := chain.UnaryClientInterceptor()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		interceptOnce(b, icpt, ctx)
	}
}

// Issue 24 items 1 and 5' (B5'): on defaults the interceptor derives one
// deadline per call — the attempt's, the earliest of the caller's, the
// overall and the per-attempt ones; none when the caller's comes first —
// and allocates at most 6 times per call (context.WithDeadline's 4 among
// them). It derived two (overall, then per-attempt) and allocated 14 times.
func TestTheInterceptorAllocatesLittle(t *testing.T) {
	chain, err := grpcmw.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	icpt := chain.UnaryClientInterceptor()
	req, reply := &testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}
	var deadline time.Time
	var hasDeadline bool
	invoke := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		deadline, hasDeadline = ctx.Deadline()
		return nil
	}
	call := func(ctx context.Context) {
		if err := icpt(ctx, "/grpc.testing.TestService/UnaryCall", req, reply, nil, invoke); err != nil {
			t.Fatal(err)
		}
	}
	call(t.Context())
	if n := testing.AllocsPerRun(1000, func() { call(t.Context()) }); n > 6 {
		t.Errorf("the interceptor allocates %v times per call, want at most 6", n)
	}
	before := time.Now()
	call(t.Context())
	after := time.Now()
	if !hasDeadline || deadline.Before(before.Add(time.Second)) || deadline.After(after.Add(time.Second)) {
		t.Errorf("the attempt's deadline is %v after the call began, want the per-attempt 1s", deadline.Sub(before))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	if n := testing.AllocsPerRun(1000, func() { call(ctx) }); n > 2 {
		t.Errorf("with the caller's deadline first, the interceptor allocates %v times, want at most 2 (no deadline derived)", n)
	}
	if call(ctx); deadline != want {
		t.Errorf("the attempt's deadline is %v, want the caller's %v unchanged", deadline, want)
	}
}
