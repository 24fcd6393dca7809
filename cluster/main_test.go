package cluster_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fake clock's start: a real date, so that times written to Redis
// look like real ones.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	interval = time.Second
	openWait = 30 * time.Second
)

// pod is one instance: a cluster and its breaker "svc", on a shared fake
// clock.
type pod struct {
	t   *testing.T
	c   *cluster.Cluster
	b   *circuitbreaker.Breaker
	rdb *redis.Client
	l   *listener
	clk resilience.Clock
}

// permit is a call that a pod's breaker admitted through its gate contract
// (Enter), reported later with Record (Exit).
type permit struct {
	p  *pod
	pm resilience.Permit
}

// enter asks the pod's breaker to admit one call.
func (p *pod) enter() (permit, error) {
	_, pm, err := p.b.Enter(context.Background())
	return permit{p, pm}, err
}

// Record reports the admitted call's outcome, ended now.
func (pm permit) Record(o resilience.Outcome) {
	_ = pm.p.b.Exit(context.Background(), pm.pm, resilience.Result{Outcome: o, End: pm.p.clk.Now()})
}

// world is a Redis server and a clock that pods share.
type world struct {
	t   *testing.T
	srv *redistest.Server
	clk *resiliencetest.Clock
}

func newWorld(t *testing.T) *world {
	return &world{t: t, srv: redistest.Start(t), clk: resiliencetest.NewClock(t0)}
}

// pod starts an instance; the cluster is not started (tests call Sync)
// unless start is set.
func (w *world) pod(id string, start bool, opts ...cluster.Option) *pod {
	w.t.Helper()
	return w.podWith(id, start, nil, opts...)
}

// podConf is a pod's breaker configuration (see podWith), with edits applied.
func podConf(edits ...func(*circuitbreaker.Config)) circuitbreaker.Config {
	return breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 10
		c.MinimumNumberOfCalls = 6
		c.WaitDurationInOpenState = openWait
		c.PermittedNumberOfCallsInHalfOpenState = 2
		for _, e := range edits {
			e(c)
		}
	})
}

// podWith is pod with breaker options after the usual ones (window of 10
// calls, 6 calls at least, 30 s open, 2 probes; the longest open wait is
// the default maxWaitDurationInOpenState, 5 min).
func (w *world) podWith(id string, start bool, bopts []circuitbreaker.Option, opts ...cluster.Option) *pod {
	w.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	return w.podClient(id, start, rdb, bopts, opts...)
}

// podOn is pod, not started, over the client rdb (closed with the pod).
func (w *world) podOn(id string, rdb *redis.Client) *pod {
	w.t.Helper()
	return w.podClient(id, false, rdb, nil)
}

func (w *world) podClient(id string, start bool, rdb *redis.Client, bopts []circuitbreaker.Option, opts ...cluster.Option) *pod {
	w.t.Helper()
	b, err := circuitbreaker.New(append([]circuitbreaker.Option{
		circuitbreaker.WithConfig(podConf()), circuitbreaker.WithName("svc"),
		circuitbreaker.WithClock(w.clk),
	}, bopts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	l := new(listener)
	opts = append([]cluster.Option{
		clusterConf(),
		cluster.WithClock(w.clk),
		cluster.WithInstanceID(id),
		cluster.WithListener(l),
		cluster.WithLogger(slog.New(l)),
	}, opts...)
	c, err := cluster.New(rdb, opts...)
	if err != nil {
		w.t.Fatal(err)
	}
	c.Add(b)
	if start {
		c.Start()
	}
	w.t.Cleanup(func() {
		c.Close()
		b.Close()
		rdb.Close()
	})
	return &pod{t: w.t, c: c, b: b, rdb: rdb, l: l, clk: w.clk}
}

// sync runs one sync and wants it to succeed.
func (p *pod) sync() {
	p.t.Helper()
	if err := p.c.Sync(p.t.Context()); err != nil {
		p.t.Fatalf("%s: Sync: %v", p.c.InstanceID(), err)
	}
}

// calls runs n calls with outcome o; it reports how many the breaker let
// through.
func (p *pod) calls(n int, o resilience.Outcome) int {
	ran := 0
	for range n {
		pm, err := p.enter()
		if err != nil {
			continue
		}
		ran++
		pm.Record(o)
	}
	return ran
}

func (p *pod) wantState(want circuitbreaker.State) {
	p.t.Helper()
	if got := p.b.State(); got != want {
		p.t.Fatalf("%s: state %v, want %v (window %+v)", p.c.InstanceID(), got, want, coord.Of(p.b).Window())
	}
}

// eventually polls cond every few milliseconds until it holds, or fails the
// test after 10 s: for what another goroutine (the channel) does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// listener counts what the cluster reports; it is also a slog.Handler that
// counts warnings: Redis down (warnings) and keys repaired (repairs).
type listener struct {
	ok, failed, remoteOpens, warnings, repairs atomic.Int64
	connected                                  atomic.Bool
	mu                                         sync.Mutex
	names                                      []string
}

func (l *listener) Synced(ok bool) {
	if ok {
		l.ok.Add(1)
	} else {
		l.failed.Add(1)
	}
}
func (l *listener) Connected(up bool) { l.connected.Store(up) }
func (l *listener) RemoteOpen(name string) {
	l.remoteOpens.Add(1)
	l.mu.Lock()
	l.names = append(l.names, name)
	l.mu.Unlock()
}

func (l *listener) Enabled(context.Context, slog.Level) bool { return true }
func (l *listener) Handle(_ context.Context, r slog.Record) error {
	switch {
	case strings.Contains(r.Message, "repaired"):
		l.repairs.Add(1)
	case r.Level >= slog.LevelWarn:
		l.warnings.Add(1)
	}
	return nil
}
func (l *listener) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *listener) WithGroup(string) slog.Handler      { return l }
