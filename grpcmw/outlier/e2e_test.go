package outlier_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// An UNAVAILABLE backend is ejected at once by consecutive failures, gets
// no calls while ejected, returns after the ejection time, and is ejected
// for twice as long the next time.
func TestUnavailableEjectedAndReturns(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false }), harnessOpts{})
	bad := h.backends[1]
	bad.code.Store(int32(codes.Unavailable))

	h.poll("the bad backend is ejected", 4, func() bool { return h.mon.IsEjected(bad.addr) })
	if got := h.events.list(); len(got) != 1 || got[0] != "ejected "+bad.addr+" consecutive_failures" {
		t.Fatalf("events %v, want one consecutive_failures ejection", got)
	}
	if got := bad.calls.Load(); got < 5 || got > 9 {
		t.Errorf("bad backend got %d calls before its ejection, want 5 (a few more while ejection is under way)", got)
	}
	h.reset()
	if failed := h.call(60); failed != 0 {
		t.Errorf("%d calls failed while the bad backend was ejected", failed)
	}
	if got := h.counts(); got[1] != 0 || got[0] == 0 || got[2] == 0 || got[3] == 0 {
		t.Fatalf("calls per backend while ejected %v, want none to backend 1 and some to the others", got)
	}

	// Ejected for base (10 s) the first time: still out after 9 s, back at 10 s.
	h.clk.Advance(9 * time.Second)
	h.wantEjected(bad)
	h.clk.Advance(time.Second)
	h.wantEjected()
	if !h.events.has("returned " + bad.addr) {
		t.Fatalf("no return event: %v", h.events.list())
	}

	// Still bad: ejected again, now for 2 × base.
	h.reset()
	h.poll("the bad backend is ejected again", 4, func() bool { return h.mon.IsEjected(bad.addr) })
	if bad.calls.Load() == 0 {
		t.Fatal("the returned backend got no calls")
	}
	h.clk.Advance(19 * time.Second)
	h.wantEjected(bad)
	h.reset()
	h.call(20)
	if got := bad.calls.Load(); got != 0 {
		t.Fatalf("bad backend got %d calls during its second ejection", got)
	}
	h.clk.Advance(time.Second)
	h.wantEjected()
}

// NOT_FOUND is a healthy backend saying no, and a meshless BULKHEAD_FULL a
// busy one: never ejected, by any detector, even with RESOURCE_EXHAUSTED
// among the failure codes.
func TestNotFoundNeverEjected(t *testing.T) {
	cfg := outlier.Config{
		Interval:            time.Second,
		FailureStatusCodes:  []codes.Code{codes.Unavailable, codes.ResourceExhausted},
		ConsecutiveFailures: outlier.ConsecutiveFailures{Threshold: 2},
		FailurePercentage:   outlier.FailurePercentage{Threshold: 10, MinimumHosts: 2, RequestVolume: 5},
		SuccessRate:         outlier.SuccessRate{StdevFactor: 0.1, MinimumHosts: 2, RequestVolume: 5},
		SlowCalls:           outlier.SlowCalls{Disabled: true},
	}
	h := newHarness(t, 4, cfg, harnessOpts{})
	h.backends[2].code.Store(int32(codes.NotFound))
	h.backends[3].busy.Store(true)
	for range 3 {
		h.call(80)
		h.clk.Advance(time.Second)
	}
	h.wantEjected()
	if got := h.counts(); got[2] < 50 || got[3] < 50 {
		t.Fatalf("calls per backend %v, want their share (60) for the NOT_FOUND (#2) and BULKHEAD_FULL (#3) backends", got)
	}
}

// A new config from the resolver keeps every endpoint's state, and the new
// interval replaces the old one.
func TestConfigChangeKeepsState(t *testing.T) {
	cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false })
	h := newHarness(t, 4, cfg, harnessOpts{})
	bad := h.backends[0]
	bad.code.Store(int32(codes.Unavailable))
	h.poll("the bad backend is ejected", 4, func() bool { return h.mon.IsEjected(bad.addr) })

	cfg.Interval = 2 * time.Second
	cfg.Monitor = h.mon.Name()
	h.update(cfg)
	h.call(8) // the update has reached the balancer once calls flow again
	h.wantEjected(bad)
	h.clk.Advance(9 * time.Second) // ticks every 2 s now; the ejection (10 s) is not over
	h.wantEjected(bad)
	h.clk.Advance(time.Second)
	h.wantEjected()
	if n := len(h.events.list()); n != 2 {
		t.Fatalf("events %v, want one ejection and one return", h.events.list())
	}
}

func TestSlowCallsEjected(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) {
		c.SlowCalls = outlier.SlowCalls{DurationThreshold: 40 * time.Millisecond, RateThreshold: 50, RequestVolume: 8}
		c.BaseEjectionTime = time.Hour
		c.MaxEjectionTime = time.Hour
	}), harnessOpts{realNow: true})
	slow, under := h.backends[0], h.backends[3]
	slow.delay.Store(int64(100 * time.Millisecond))
	under.delay.Store(int64(5 * time.Millisecond))
	h.call(4 * 10)
	h.clk.Advance(time.Second)
	h.wantEjected(slow)
	if !h.events.has("ejected " + slow.addr + " slow_calls") {
		t.Fatalf("events %v, want a slow_calls ejection", h.events.list())
	}
	h.reset()
	h.call(20)
	if got := h.counts(); got[0] != 0 || got[3] == 0 {
		t.Fatalf("calls per backend %v, want none to the slow backend, some to the one under the threshold", got)
	}
}

func TestSuccessRate(t *testing.T) {
	sr := func(minHosts, volume int) outlier.Config {
		return only(func(c *outlier.Config) {
			c.SuccessRate = outlier.SuccessRate{StdevFactor: 1, MinimumHosts: minHosts, RequestVolume: volume}
		})
	}
	for _, tc := range []struct {
		name  string
		cfg   outlier.Config
		eject bool
	}{
		{name: "ejects", cfg: sr(3, 20), eject: true},
		{name: "too few hosts", cfg: sr(6, 20)},
		{name: "too little volume", cfg: sr(3, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 5, tc.cfg, harnessOpts{})
			bad := h.backends[4]
			bad.code.Store(int32(codes.Internal))
			bad.failEvery.Store(2) // a 50 % success rate against 100 % elsewhere
			h.call(5 * 30)
			h.clk.Advance(time.Second)
			if !tc.eject {
				h.wantEjected()
				return
			}
			h.wantEjected(bad)
			if !h.events.has("ejected " + bad.addr + " success_rate") {
				t.Fatalf("events %v", h.events.list())
			}
		})
	}
}

func TestFailurePercentage(t *testing.T) {
	fp := func(minHosts, volume int) outlier.Config {
		return only(func(c *outlier.Config) {
			c.FailurePercentage = outlier.FailurePercentage{Threshold: 85, MinimumHosts: minHosts, RequestVolume: volume}
		})
	}
	for _, tc := range []struct {
		name  string
		cfg   outlier.Config
		eject bool
	}{
		{name: "ejects", cfg: fp(3, 20), eject: true},
		{name: "too few hosts", cfg: fp(6, 20)},
		{name: "too little volume", cfg: fp(3, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 5, tc.cfg, harnessOpts{})
			bad := h.backends[2]
			bad.code.Store(int32(codes.Unavailable))
			h.call(5 * 30)
			h.clk.Advance(time.Second)
			if !tc.eject {
				h.wantEjected()
				return
			}
			h.wantEjected(bad)
			if !h.events.has("ejected " + bad.addr + " failure_percentage") {
				t.Fatalf("events %v", h.events.list())
			}
		})
	}
}

// When every backend fails, no more than maxEjectionPercent are ejected and
// calls still go out.
func TestEveryBackendFails(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) {
		c.ConsecutiveFailures.Disabled = false
		c.FailurePercentage = outlier.FailurePercentage{Threshold: 50, MinimumHosts: 1, RequestVolume: 5}
		c.MaxEjectionPercent = 50
	}), harnessOpts{})
	for _, b := range h.backends {
		b.code.Store(int32(codes.Unavailable))
	}
	h.poll("two backends are ejected", 4, func() bool { return len(h.mon.Ejected()) == 2 })
	for range 3 {
		h.call(20)
		h.clk.Advance(time.Second)
		if got := h.mon.Ejected(); len(got) != 2 {
			t.Fatalf("ejected %v, want exactly 2 of 4 (maxEjectionPercent 50)", got)
		}
	}
	h.reset()
	if failed := h.call(40); failed != 40 {
		t.Fatalf("%d of 40 calls failed, want all (every backend answers UNAVAILABLE)", failed)
	}
	var total, serving int64
	for _, b := range h.backends {
		n := b.calls.Load()
		total += n
		if n > 0 {
			serving++
		}
	}
	if total != 40 || serving != 2 {
		t.Fatalf("calls per backend %v, want all 40 to reach the 2 not ejected", h.counts())
	}
}

// A backend killed mid-test is routed around, and gets calls again once
// restarted on the same address.
func TestBackendRestart(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false }), harnessOpts{})
	b := h.backends[2]
	b.stop()
	h.reset()
	h.call(40)
	if got := b.calls.Load(); got != 0 {
		t.Fatalf("stopped backend got %d calls", got)
	}
	b.start(t, b.addr)
	t.Cleanup(b.stop)
	h.poll("the restarted backend gets calls", 0, func() bool {
		h.call(8)
		h.clk.Advance(time.Second) // returns it if it was ejected meanwhile
		return b.calls.Load() > 0
	})
}

// Addresses added and removed by the resolver: new ones get calls, removed
// ones none; an ejected endpoint that stays keeps its state, one that goes
// loses it.
func TestResolverUpdates(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false }), harnessOpts{initial: 3})
	b0, b1, b2, b3 := h.backends[0], h.backends[1], h.backends[2], h.backends[3]
	b0.code.Store(int32(codes.Unavailable))
	h.poll("b0 is ejected", 3, func() bool { return h.mon.IsEjected(b0.addr) })

	h.r.UpdateState(h.state(b0, b1, b2, b3))
	h.poll("the added backend gets calls", 4, func() bool { return b3.calls.Load() > 0 })
	h.wantEjected(b0)

	h.r.UpdateState(h.state(b0, b2, b3))
	h.poll("the removed backend gets no calls", 0, func() bool {
		h.reset()
		h.call(12)
		return b1.calls.Load() == 0
	})
	h.wantEjected(b0)

	h.r.UpdateState(h.state(b2, b3))
	h.poll("the removed ejected endpoint is forgotten", 2, func() bool { return len(h.mon.Ejected()) == 0 })
	if !h.events.has("returned " + b0.addr) {
		t.Fatalf("events %v, want b0's return when it left", h.events.list())
	}
	b0.code.Store(int32(codes.OK))
	h.r.UpdateState(h.state(b0, b2, b3))
	h.reset()
	h.poll("the re-added backend gets calls", 3, func() bool { return b0.calls.Load() > 0 })
	h.wantEjected()
}

// A backend whose health service says NOT_SERVING gets no calls, and gets
// them again once SERVING.
func TestHealthCheck(t *testing.T) {
	overall := ""
	h := newHarness(t, 4, outlier.Config{}, harnessOpts{healthCheck: &overall})
	b := h.backends[1]
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	h.poll("the NOT_SERVING backend gets no calls", 0, func() bool {
		h.reset()
		h.call(12)
		return b.calls.Load() == 0
	})
	h.reset()
	h.call(40)
	if got := b.calls.Load(); got != 0 {
		t.Fatalf("NOT_SERVING backend got %d calls", got)
	}
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.poll("the SERVING backend gets calls again", 4, func() bool { return b.calls.Load() > 0 })
}

// When the resolver drops the endpoints that serve, leaving only ejected
// ones, enough of them return at once that the cap holds and one serves.
func TestShrinkKeepsOneServing(t *testing.T) {
	h := newHarness(t, 4, only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false }), harnessOpts{})
	for _, b := range h.backends {
		b.code.Store(int32(codes.Unavailable))
	}
	h.poll("two backends are ejected", 4, func() bool { return len(h.mon.Ejected()) == 2 })
	var ejected []*backend
	for _, b := range h.backends {
		if h.mon.IsEjected(b.addr) {
			ejected = append(ejected, b)
		}
	}
	for _, b := range h.backends {
		b.code.Store(int32(codes.OK))
	}

	// Two endpoints, both ejected: the cap (50 % of 2) leaves one ejected.
	h.r.UpdateState(h.state(ejected...))
	h.poll("one of the two endpoints returns (cap: 50 % of 2)", 0, func() bool { return len(h.mon.Ejected()) == 1 })
	h.reset()
	if failed := h.call(10); failed != 0 {
		t.Fatalf("%d of 10 calls failed", failed)
	}
	if got := ejected[0].calls.Load() + ejected[1].calls.Load(); got != 10 {
		t.Fatalf("calls per backend %v, want all 10 to the endpoint that returned", h.counts())
	}

	// One endpoint: it always serves.
	last := ejected[0]
	if !h.mon.IsEjected(last.addr) {
		last = ejected[1]
	}
	h.r.UpdateState(h.state(last))
	h.poll("the only endpoint returns", 0, func() bool { return len(h.mon.Ejected()) == 0 })
	h.reset()
	if failed := h.call(10); failed != 0 || last.calls.Load() != 10 {
		t.Fatalf("%d calls failed, calls per backend %v: want the only endpoint to serve all 10", failed, h.counts())
	}
}

// A health change heard while an endpoint is ejected is what the child sees
// when the endpoint returns: NOT_SERVING keeps it out after its ejection.
func TestHealthWhileEjected(t *testing.T) {
	overall := ""
	h := newHarness(t, 4, only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false }),
		harnessOpts{healthCheck: &overall})
	b := h.backends[2]
	b.code.Store(int32(codes.Unavailable))
	h.poll("the backend is ejected", 4, func() bool { return h.mon.IsEjected(b.addr) })
	b.code.Store(int32(codes.OK))
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	// A watcher of our own sees NOT_SERVING when the client's health check
	// does (give or take the client's own processing): the change is then
	// heard while the endpoint is still ejected.
	watchUntil(t, b.addr, healthpb.HealthCheckResponse_NOT_SERVING)
	h.clk.Advance(10 * time.Second) // the ejection is over
	h.wantEjected()
	h.poll("the returned but NOT_SERVING backend gets no calls", 0, func() bool {
		h.reset()
		h.call(12)
		return b.calls.Load() == 0
	})
	b.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.poll("the SERVING backend gets calls again", 4, func() bool { return b.calls.Load() > 0 })
}

// watchUntil watches addr's overall health until it reports want.
func watchUntil(t *testing.T, addr string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching %s until %v: %v", addr, want, err)
		}
		if resp.GetStatus() == want {
			return
		}
	}
}

// TestAConfigWithoutDetectorsReturnsEveryEndpoint: a service config that
// switches every detector off returns the ejected endpoints at once (gRFC
// A50), rather than leaving them out for the rest of their ejection time.
func TestAConfigWithoutDetectorsReturnsEveryEndpoint(t *testing.T) {
	cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false })
	h := newHarness(t, 3, cfg, harnessOpts{})
	bad := h.backends[0]
	bad.code.Store(int32(codes.Unavailable))
	h.poll("the bad backend is ejected", 3, func() bool { return h.mon.IsEjected(bad.addr) })

	off := only(func(*outlier.Config) {})
	off.Monitor = h.mon.Name()
	h.update(off)
	h.poll("the update returns the ejected backend", 3, func() bool { return !h.mon.IsEjected(bad.addr) })
	h.clk.Advance(time.Second) // the ejection (10 s) is far from over
	h.wantEjected()
	h.reset()
	h.poll("the returned backend gets calls", 3, func() bool { return bad.calls.Load() > 0 })
}

// TestANewConfigsEjectionTimeAppliesToEjectionsInProgress: as in gRFC A50,
// an ejection ends by the ejection times of the config in force at each
// interval, not of the one in force when it began.
func TestANewConfigsEjectionTimeAppliesToEjectionsInProgress(t *testing.T) {
	cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures.Disabled = false })
	h := newHarness(t, 3, cfg, harnessOpts{})
	bad := h.backends[0]
	bad.code.Store(int32(codes.Unavailable))
	h.poll("the bad backend is ejected", 3, func() bool { return h.mon.IsEjected(bad.addr) })
	bad.code.Store(int32(codes.OK))

	cfg.BaseEjectionTime, cfg.MaxEjectionTime = 2*time.Second, 2*time.Second // was 10 s
	// A second Monitor on the same clock: that it hears of the ejection
	// shows the new config has reached the balancer.
	mon, err := outlier.NewMonitor(outlier.WithClock(h.clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	cfg.Monitor = mon.Name()
	h.update(cfg)
	h.poll("the new config reaches the balancer", 3, func() bool { return mon.IsEjected(bad.addr) })
	h.clk.Advance(time.Second)
	if !mon.IsEjected(bad.addr) {
		t.Fatal("returned after 1 s, want 2 s")
	}
	h.clk.Advance(time.Second) // 2 s since the ejection: over by the new config
	if got := mon.Ejected(); len(got) != 0 {
		t.Fatalf("ejected %v after 2 s, want none: the new config's ejection time is 2 s", got)
	}
}
