package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience"
)

const (
	ok   = resilience.Success
	fail = resilience.Failure
)

func TestAnOpenReachesThePodsThatSawNothingInOneSync(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.pod("a", false), w.pod("b", false), w.pod("c", false)
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	a.calls(6, fail)
	a.wantState(circuitbreaker.StateOpen)
	b.wantState(circuitbreaker.StateClosed)
	a.sync() // publishes the open
	b.sync() // one sync: reads it
	c.sync()
	until := coord.Of(a.b).Window().Until
	for _, p := range []*pod{b, c} {
		p.wantState(circuitbreaker.StateOpen)
		if got := coord.Of(p.b).Window().Until; !got.Equal(until) {
			t.Errorf("%s opens until %v, want the opener's %v", p.c.InstanceID(), got, until)
		}
		if n := p.calls(1, ok); n != 0 {
			t.Errorf("%s let a call through", p.c.InstanceID())
		}
		if n := p.l.remoteOpens.Load(); n != 1 {
			t.Errorf("%s counted %d remote opens, want 1", p.c.InstanceID(), n)
		}
	}
	if n := a.l.remoteOpens.Load(); n != 0 {
		t.Errorf("the opener counted %d remote opens", n)
	}
}

func TestAnOpenTravelsOnTheChannelAtOnce(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.pod("a", true), w.pod("b", true), w.pod("c", true)
	// Wait until all three listen, or a message could go before they do.
	eventually(t, "three subscribers", func() bool {
		n, err := a.rdb.PubSubNumSub(t.Context(), "test:events").Result()
		return err == nil && n["test:events"] == 3
	})
	eventually(t, "connected", func() bool { return a.c.Connected() })
	a.calls(6, fail) // no Sync called: the open goes through the channel
	for _, p := range []*pod{b, c} {
		eventually(t, p.c.InstanceID()+" open", func() bool { return p.b.State() == circuitbreaker.StateOpen })
	}
	if coord.Of(b.b).Window().Until != coord.Of(a.b).Window().Until {
		t.Errorf("b opens until %v, a until %v", coord.Of(b.b).Window().Until, coord.Of(a.b).Window().Until)
	}
}

func TestTheClusterOpensWhatNoPodCouldDecideAlone(t *testing.T) {
	for _, tt := range []struct {
		name     string
		decideOn cluster.DecideOn
		opens    bool
	}{
		{name: "either", decideOn: cluster.DecideEither, opens: true},
		{name: "cluster", decideOn: cluster.DecideCluster, opens: true},
		{name: "local", decideOn: cluster.DecideLocal, opens: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			var pods []*pod
			for _, id := range []string{"a", "b", "c"} {
				p := w.pod(id, false, decideOn(tt.decideOn))
				p.sync()
				p.calls(3, fail) // 3 < minimumNumberOfCalls (6)
				p.wantState(circuitbreaker.StateClosed)
				pods = append(pods, p)
			}
			for range 2 { // the first round publishes, the second decides and spreads
				for _, p := range pods {
					p.sync()
				}
			}
			want := circuitbreaker.StateClosed
			if tt.opens {
				want = circuitbreaker.StateOpen
			}
			for _, p := range pods {
				p.wantState(want)
			}
			if tt.opens && coord.Of(pods[0].b).Window().Until != coord.Of(pods[2].b).Window().Until {
				t.Error("the pods open until different times")
			}
		})
	}
}

func TestDecideOnClusterIgnoresOneBadPodWhileRedisAnswers(t *testing.T) {
	w := newWorld(t)
	a := w.pod("a", false, decideOn(cluster.DecideCluster))
	b := w.pod("b", false, decideOn(cluster.DecideCluster))
	a.sync()
	b.sync()
	b.calls(10, ok)
	b.sync()
	a.calls(6, fail) // alone it would open; with b's 10 successes: 6/16 < 50%
	a.sync()
	a.wantState(circuitbreaker.StateClosed)
	a.calls(4, fail) // a's window: 10 failures; cluster: 10/20 = 50%
	a.sync()
	a.wantState(circuitbreaker.StateOpen)
}

func TestDeadInstancesAndGarbageVanish(t *testing.T) {
	w := newWorld(t)
	a, d := w.pod("a", false), w.pod("dead", false)
	ctx := context.Background()
	d.calls(5, fail)
	d.sync()
	d.c.Close() // the pod is gone; its field stays until stale
	a.rdb.HSet(ctx, "test:w:svc", "junk", "not numbers")
	a.calls(1, fail)
	a.sync()
	// d's 5 failures are fresh: with a's one, 6 calls all failed.
	a.wantState(circuitbreaker.StateOpen)
	if ttl := a.rdb.PTTL(ctx, "test:open:svc").Val(); ttl <= 0 {
		t.Errorf("open key TTL %v, want one", ttl)
	}
	a.b.Reset()
	w.clk.Advance(3*interval + time.Millisecond)
	a.sync() // d's field is stale now: marked
	a.sync() // and deleted
	fields := a.rdb.HGetAll(ctx, "test:w:svc").Val()
	if _, ok := fields["dead"]; ok || len(fields) != 1 {
		t.Errorf("window hash holds %v, want only a's", fields)
	}
	if ttl := a.rdb.PTTL(ctx, "test:w:svc").Val(); ttl <= 0 || ttl > 3*interval {
		t.Errorf("window TTL %v, want (0, %v]", ttl, 3*interval)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  cluster.Option
		want string
	}{
		{name: "namespace", opt: clusterConf(func(c *cluster.Config) { c.Namespace = "" }), want: "namespace: must not be empty"},
		{name: "namespace, a key's separators", opt: clusterConf(func(c *cluster.Config) { c.Namespace = "a:w" }), want: `namespace: must not hold ":w:"`},
		{name: "interval", opt: clusterConf(func(c *cluster.Config) { c.SyncInterval = 0 }), want: "syncInterval: must be in [10ms, 1h0m0s], got 0s"},
		{name: "decideOn", opt: decideOn(9), want: "decideOn: must be local, cluster or either"},
		{name: "instance", opt: cluster.WithInstanceID("a b"), want: "instanceID: must be 1 to 64 bytes without spaces"},
		{name: "instance, a non-ASCII space", opt: cluster.WithInstanceID("a\u00a0b"), want: "instanceID: must be 1 to 64 bytes without spaces"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cluster.New(nil, tt.opt)
			if err == nil || !contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want it to say %q", err, tt.want)
			}
		})
	}
	if _, err := cluster.New(nil); err == nil || !contains(err.Error(), "redis: needs a client") {
		t.Fatalf("New(nil): %v", err)
	}
	if d, err := cluster.ParseDecideOn("CLUSTER"); err != nil || d != cluster.DecideCluster {
		t.Fatalf("ParseDecideOn(CLUSTER) = %v, %v", d, err)
	}
	if _, err := cluster.ParseDecideOn("both"); err == nil || !contains(err.Error(), "decideOn") {
		t.Fatalf("ParseDecideOn(both): %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
