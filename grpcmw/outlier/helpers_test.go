package outlier_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// backend is a real gRPC server on loopback TCP whose answer a test sets.
type backend struct {
	testgrpc.UnimplementedTestServiceServer
	addr   string
	srv    *grpc.Server
	health *health.Server

	calls     atomic.Int64
	code      atomic.Int32 // the code to answer with (OK: success)
	failEvery atomic.Int64 // > 0: answer code only on every failEvery-th call
	delay     atomic.Int64 // nanoseconds to take per call
	busy      atomic.Bool  // answer as a full meshless bulkhead
	n         atomic.Int64
}

func (b *backend) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	b.calls.Add(1)
	n := b.n.Add(1)
	if d := time.Duration(b.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.busy.Load() {
		st, err := status.New(codes.ResourceExhausted, "bulkhead full").WithDetails(
			&errdetails.ErrorInfo{Reason: "BULKHEAD_FULL", Domain: "meshless.dev"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	c := codes.Code(b.code.Load())
	if every := b.failEvery.Load(); c == codes.OK || (every > 0 && n%every != 0) {
		return &testgrpc.Empty{}, nil
	}
	return nil, status.Error(c, "backend says so")
}

// start serves on addr ("127.0.0.1:0" for a new port).
func (b *backend) start(t testing.TB, addr string) {
	t.Helper()
	var lis net.Listener
	var err error
	for range 50 { // a just-closed port can take a moment to be free again
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	b.addr = lis.Addr().String()
	b.srv = grpc.NewServer()
	testgrpc.RegisterTestServiceServer(b.srv, b)
	if b.health == nil {
		b.health = health.NewServer()
	}
	healthpb.RegisterHealthServer(b.srv, b.health)
	go func() { _ = b.srv.Serve(lis) }()
}

func (b *backend) stop() { b.srv.Stop() }

// harness is a client with the outlier balancer over n backends behind a
// manual resolver, with a fake clock driving the balancer's interval.
type harness struct {
	t        *testing.T
	clk      *resiliencetest.Clock
	mon      *outlier.Monitor
	events   *events
	backends []*backend
	r        *manual.Resolver
	cc       *grpc.ClientConn
	client   testgrpc.TestServiceClient
}

type harnessOpts struct {
	realNow     bool // time calls with the real clock; timers stay fake
	healthCheck *string
	initial     int // backends in the resolver at first; default all
}

var schemeSeq atomic.Int64

func newHarness(t *testing.T, n int, cfg outlier.Config, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, clk: resiliencetest.NewClock(t0), events: new(events)}
	var clk resilience.Clock = h.clk
	if o.realNow {
		clk = realNowClock{h.clk}
	}
	mon, err := outlier.NewMonitor(outlier.WithClock(clk), outlier.WithListener(h.events))
	if err != nil {
		t.Fatal(err)
	}
	h.mon = mon
	t.Cleanup(mon.Close)
	for range n {
		b := new(backend)
		b.start(t, "127.0.0.1:0")
		t.Cleanup(b.stop)
		h.backends = append(h.backends, b)
	}
	cfg.Monitor = mon.Name()
	sc, err := outlier.ServiceConfigJSON(cfg, o.healthCheck)
	if err != nil {
		t.Fatal(err)
	}
	h.r = manual.NewBuilderWithScheme(fmt.Sprintf("outliertest%d", schemeSeq.Add(1)))
	if o.initial == 0 {
		o.initial = n
	}
	h.r.InitialState(h.state(h.backends[:o.initial]...))
	cc, err := grpc.NewClient(h.r.Scheme()+":///test",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(h.r),
		grpc.WithDefaultServiceConfig(sc),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	h.cc, h.client = cc, testgrpc.NewTestServiceClient(cc)
	h.waitServing(h.backends[:o.initial]...)
	// One interval passes, so that the warm-up calls leave the balancer's
	// counters and each test starts a clean interval.
	interval := cfg.Interval
	if interval == 0 {
		interval = 10 * time.Second
	}
	h.clk.Advance(interval)
	h.wantEjected()
	return h
}

// update gives the balancer cfg, in a service config with every backend.
func (h *harness) update(cfg outlier.Config) {
	h.t.Helper()
	js, err := outlier.ServiceConfigJSON(cfg, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	st := h.state(h.backends...)
	st.ServiceConfig = h.r.CC().ParseServiceConfig(js)
	if st.ServiceConfig.Err != nil {
		h.t.Fatal(st.ServiceConfig.Err)
	}
	h.r.UpdateState(st)
}

func (h *harness) state(bs ...*backend) resolver.State {
	var s resolver.State
	for _, b := range bs {
		s.Addresses = append(s.Addresses, resolver.Address{Addr: b.addr})
	}
	return s
}

// call makes n calls one after the other and returns how many failed.
func (h *harness) call(n int) (failed int) {
	h.t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
		_, err := h.client.EmptyCall(ctx, &testgrpc.Empty{}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			failed++
		}
	}
	return failed
}

// poll calls cond, with calls made between tries, until it holds; it fails
// the test after 20 s.
func (h *harness) poll(what string, callsPerTry int, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s; calls per backend %v, ejected %v, events %v",
				what, h.counts(), h.mon.Ejected(), h.events.list())
		}
		if callsPerTry > 0 {
			h.call(callsPerTry)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// waitServing makes calls until each of bs has received one, then resets
// the counts.
func (h *harness) waitServing(bs ...*backend) {
	h.t.Helper()
	h.poll("every backend serves", len(bs), func() bool {
		for _, b := range bs {
			if b.calls.Load() == 0 {
				return false
			}
		}
		return true
	})
	h.reset()
}

func (h *harness) reset() {
	for _, b := range h.backends {
		b.calls.Store(0)
		b.n.Store(0)
	}
}

func (h *harness) counts() []int64 {
	out := make([]int64, len(h.backends))
	for i, b := range h.backends {
		out[i] = b.calls.Load()
	}
	return out
}

func (h *harness) wantEjected(want ...*backend) {
	h.t.Helper()
	var addrs []string
	for _, b := range want {
		addrs = append(addrs, b.addr)
	}
	slices.Sort(addrs)
	if got := h.mon.Ejected(); !slices.Equal(got, addrs) && !(len(got) == 0 && len(addrs) == 0) {
		h.t.Fatalf("ejected %v, want %v (events %v, calls per backend since the last reset %v)", got, addrs, h.events.list(), h.counts())
	}
}

// events records what the Listener hears, as "ejected <addr> <reason>" and
// "returned <addr>".
type events struct {
	mu sync.Mutex
	ev []string
}

func (e *events) Ejected(addr, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, "ejected "+addr+" "+reason)
}

func (e *events) Returned(addr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, "returned "+addr)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ev)
}

func (e *events) has(s string) bool {
	return slices.ContainsFunc(e.list(), func(x string) bool { return strings.HasPrefix(x, s) })
}

// only returns a Config with every detector off but those that set adds.
func only(set func(*outlier.Config)) outlier.Config {
	c := outlier.Config{
		Interval:            time.Second,
		BaseEjectionTime:    10 * time.Second,
		MaxEjectionTime:     100 * time.Second,
		ConsecutiveFailures: outlier.ConsecutiveFailures{Disabled: true},
		FailurePercentage:   outlier.FailurePercentage{Disabled: true},
		SuccessRate:         outlier.SuccessRate{Disabled: true},
		SlowCalls:           outlier.SlowCalls{Disabled: true},
	}
	set(&c)
	return c
}

// realNowClock reads the real time (so calls are timed for real) but fires
// timers only when the fake clock is advanced.
type realNowClock struct{ *resiliencetest.Clock }

func (realNowClock) Now() time.Time { return time.Now() }
