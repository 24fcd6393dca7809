package main

import (
	"bytes"
	"io"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// shortClusterConfig is the cluster scenario as the program plays it, with
// the dependency and the embedded miniredis on in-memory pipes:
// both work inside a synctest bubble, where every call, sync and open
// happens at an exact fake time however busy the machine.
func shortClusterConfig(t *testing.T) clusterConfig {
	t.Helper()
	cfg, err := defaultClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net, cfg.inProcess = new(memPods), true
	return cfg
}

// heard counts what the pods' clusters tell their listener.
type heard struct{ syncs, failed, up, remoteOpens atomic.Int32 }

func (h *heard) Synced(ok bool) {
	if ok {
		h.syncs.Add(1)
	} else {
		h.failed.Add(1)
	}
}

func (h *heard) Connected(up bool) {
	if up {
		h.up.Add(1)
	}
}
func (h *heard) RemoteOpen(string) { h.remoteOpens.Add(1) }

func runClusterInBubble(t *testing.T, cfg clusterConfig, w io.Writer) clusterSummary {
	t.Helper()
	var sum clusterSummary
	synctest.Test(t, func(t *testing.T) {
		var err error
		if sum, err = runCluster(t.Context(), cfg, w); err != nil {
			t.Fatalf("runCluster: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return sum
}

// callsBefore is how many calls a pod at rate r has started before at: it
// calls in the middle of each of its intervals.
func callsBefore(at time.Duration, r int) int {
	return int(math.Ceil(at.Seconds()*float64(r) - 0.5))
}

func TestClusterModeSparesTheDeadDependency(t *testing.T) {
	cfg := shortClusterConfig(t)
	h := new(heard)
	cfg.Cluster = h
	var out bytes.Buffer
	sum := runClusterInBubble(t, cfg, &out)
	t.Logf("output:\n%s", out.String())
	if len(sum.Runs) != 2 || sum.Runs[modeAlone].Name != "alone" || sum.Runs[modeCluster].Name != "cluster" {
		t.Fatalf("runs %+v, want alone and cluster", sum.Runs)
	}
	minCalls := cfg.minimumCalls()
	for _, r := range sum.Runs {
		for i, p := range r.Pods {
			// Every call either reached the dependency, which counted it, or
			// was rejected at once; nothing succeeded.
			want := int(cfg.Run.Seconds() * float64(cfg.Rates[i]))
			if p.Calls() != want || p.Failed != p.Reached || p.OK != 0 || p.Other != 0 {
				t.Errorf("%s, pod %s: %+v; want %d calls, each UNAVAILABLE from the dependency (which counted it) or CIRCUIT_OPEN", r.Name, p.Name, p, want)
			}
		}
	}

	// Alone: pod A opens once it has the 10 calls its breaker needs; B and
	// C, at 1 call a second, never get there: every one of their calls
	// reaches the dead dependency.
	alone := sum.Runs[modeAlone]
	if a := alone.Pods[0]; a.Reached != minCalls {
		t.Errorf("alone, pod A: %d requests reached the dependency, want %d (minimumNumberOfCalls)", a.Reached, minCalls)
	}
	for i := 1; i < 3; i++ {
		p := alone.Pods[i]
		if _, _, opened := alone.OpenedAt(i); opened || p.Rejected != 0 {
			t.Errorf("alone, pod %s opened or rejected (%+v): with %d calls it cannot decide", p.Name, p, p.Calls())
		}
	}

	// In cluster mode: pod A's breaker opens first, by itself, before it
	// has the calls to decide alone: the cluster's summed windows decided.
	// B and C open through Redis within one sync interval, and from then on
	// their calls are rejected at once, without reaching the dependency.
	cl := sum.Runs[modeCluster]
	first, ok := cl.FirstOpen()
	if !ok || first.Pod != 0 {
		t.Fatalf("cluster: the first breaker to open by itself was %+v (found %v), want pod A's; events %+v", first, ok, cl.Events)
	}
	if a := cl.Pods[0]; a.Reached >= minCalls {
		t.Errorf("cluster, pod A: %d requests reached the dependency before it opened: it could have decided alone (%d)", a.Reached, minCalls)
	}
	for i := 1; i < 3; i++ {
		p := cl.Pods[i]
		at, remote, opened := cl.OpenedAt(i)
		switch {
		case !opened || !remote:
			t.Errorf("cluster, pod %s: opened %v, remote %v; want opened by A's open, through Redis", p.Name, opened, remote)
		case at < first.At || at > first.At+cfg.syncInterval():
			t.Errorf("cluster, pod %s opened at %v, A at %v: want within one sync interval (%v)", p.Name, at, first.At, cfg.syncInterval())
		}
		if p.Reached != callsBefore(first.At, cfg.Rates[i]) || p.Rejected == 0 {
			t.Errorf("cluster, pod %s: %d requests reached the dependency and %d were rejected; want only the %d started before A opened at %v to reach it, the others rejected",
				p.Name, p.Reached, p.Rejected, callsBefore(first.At, cfg.Rates[i]), first.At)
		}
		if p.FirstRejected < first.At || p.FirstRejected > first.At+cfg.syncInterval() {
			t.Errorf("cluster, pod %s: first CIRCUIT_OPEN at %v, A opened at %v: want within one sync interval", p.Name, p.FirstRejected, first.At)
		}
	}

	// The headline: the dead dependency received fewer requests in cluster
	// mode, from the run's own counts. With these rates it is 20 against
	// 11; the margin asked for is 8 (40% of alone's).
	a, c := alone.Reached(), cl.Reached()
	t.Logf("requests that reached the dead dependency: alone %d, cluster %d", a, c)
	if c > a-8 {
		t.Errorf("cluster mode: %d requests reached the dead dependency, alone %d: want at least 8 fewer", c, a)
	}

	// The metrics' listener heard the three pods' syncs and the two
	// remote opens; Redis answered every sync.
	if h.remoteOpens.Load() != 2 || h.syncs.Load() < 3*int32(cfg.Run/cfg.syncInterval()) || h.failed.Load() != 0 || h.up.Load() != 3 {
		t.Errorf("the cluster listener heard %d remote opens, %d syncs (%d failed), %d connects: want 2, %d or more, 0, 3",
			h.remoteOpens.Load(), h.syncs.Load(), h.failed.Load(), h.up.Load(), 3*int32(cfg.Run/cfg.syncInterval()))
	}
}

func TestClusterScenarioRejectsBadConfig(t *testing.T) {
	cfg := shortClusterConfig(t)
	cfg.Run = 0
	cfg.Rates = []int{0}
	if _, err := runCluster(t.Context(), cfg, io.Discard); err == nil {
		t.Error("runCluster accepted a zero run and a single pod at 0 calls a second")
	}
	cfg = shortClusterConfig(t)
	cfg.Client.Cluster = nil
	if err := cfg.validate(); err == nil {
		t.Error("a client without a cluster section validated")
	}
}
