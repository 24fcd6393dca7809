package cluster_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
)

// openAll opens a, spreads the open to the others by one sync each, and
// waits out the open state: every pod is half-open.
func openAll(t *testing.T, w *world, pods ...*pod) {
	t.Helper()
	pods[0].calls(6, fail)
	for _, p := range pods {
		p.sync()
	}
	w.clk.Advance(openWait)
	for _, p := range pods {
		p.wantState(circuitbreaker.StateHalfOpen)
	}
}

// probes acquires up to n probe permits on each pod and returns them.
func probes(n int, pods ...*pod) map[*pod][]permit {
	out := map[*pod][]permit{}
	for _, p := range pods {
		for range n {
			if pm, err := p.enter(); err == nil {
				out[p] = append(out[p], pm)
			} else if !errors.Is(err, circuitbreaker.ErrOpen) {
				panic(err)
			}
		}
	}
	return out
}

func count(m map[*pod][]permit) int {
	n := 0
	for _, l := range m {
		n += len(l)
	}
	return n
}

func TestHalfOpenProbesAreLimitedClusterWide(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.pod("a", false), w.pod("b", false), w.pod("c", false)
	openAll(t, w, a, b, c)
	// No pod probes before it holds a lease.
	if n := count(probes(5, a, b, c)); n != 0 {
		t.Fatalf("%d probes ran before any lease", n)
	}
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	held := probes(5, a, b, c)
	if n := count(held); n != 2 {
		t.Fatalf("%d probes ran across the cluster, want permittedNumberOfCallsInHalfOpenState = 2", n)
	}
	// More syncs lease nothing more while the probes are out.
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	if n := count(probes(5, a, b, c)); n != 0 {
		t.Fatalf("%d more probes ran while 2 were out", n)
	}
	// The holder's probes succeed: it closes, and so does everyone.
	var holder *pod
	for p, pms := range held {
		holder = p
		for _, pm := range pms {
			pm.Record(ok)
		}
	}
	holder.wantState(circuitbreaker.StateClosed)
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	for _, p := range []*pod{a, b, c} {
		p.wantState(circuitbreaker.StateClosed)
	}
}

func TestFailedProbesReopenEverywhere(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	openAll(t, w, a, b)
	a.sync()
	b.sync()
	held := probes(2, a, b)
	if len(held[a]) != 2 {
		t.Fatalf("a holds %d probes, want 2 (it leased first)", len(held[a]))
	}
	for _, pm := range held[a] {
		pm.Record(fail)
	}
	a.wantState(circuitbreaker.StateOpen)
	a.sync()
	b.sync()
	b.wantState(circuitbreaker.StateOpen)
	wa, wb := coord.Of(a.b).Window(), coord.Of(b.b).Window()
	if !wa.Until.Equal(wb.Until) || wa.Reopens != 1 || wb.Reopens != 1 {
		t.Fatalf("a %+v, b %+v: want the same re-open", wa, wb)
	}
	if got := wa.Until.Sub(w.clk.Now()); got != 2*openWait {
		t.Fatalf("re-open wait %v, want %v (doubled)", got, 2*openWait)
	}
}

func TestAPodThatMissedTheCloseLearnsItWhenItLeases(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	openAll(t, w, a, b)
	a.sync()
	for _, pm := range probes(2, a)[a] {
		pm.Record(ok)
	}
	a.sync() // publishes the close; b listens to no channel (not started)
	b.wantState(circuitbreaker.StateHalfOpen)
	b.sync()
	b.wantState(circuitbreaker.StateClosed)
}

func TestTwoOpensAtOnceAgreeOnTheFirst(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	a.calls(6, fail)
	w.clk.Advance(time.Second)
	b.calls(6, fail) // b opens on its own, a second later, before any sync
	a.sync()         // a's open is claimed first
	b.sync()         // b finds it in force and takes its end
	if wa, wb := coord.Of(a.b).Window(), coord.Of(b.b).Window(); !wa.Until.Equal(wb.Until) {
		t.Fatalf("a opens until %v, b until %v: want the first claim's end", wa.Until, wb.Until)
	}
	w.clk.Advance(openWait - time.Second)
	a.wantState(circuitbreaker.StateHalfOpen)
	b.wantState(circuitbreaker.StateHalfOpen)
	a.sync()
	b.sync()
	if n := count(probes(5, a, b)); n != 2 {
		t.Fatalf("%d probes across the two pods, want 2", n)
	}
}

// The pod that leases a round's probes may get no call to probe with (its
// traffic went elsewhere). Before, it renewed its lease at every sync and
// held the round's probes for as long as it got no call: the pods that had
// calls stayed HALF_OPEN, rejecting every one of them, for ever (with the
// default maxWaitDurationInHalfOpenState of 0). Now a holder that handed
// out none of its probes for a sync interval gives them back, and leases
// again only once it has rejected a call; the limit still holds.
func TestAnIdleHolderGivesItsProbesBack(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	openAll(t, w, a, b)
	a.sync() // a leases both probes, and gets no call
	b.sync()
	var held []permit
	for i := 0; i < 5 && len(held) == 0; i++ {
		held = probes(2, b)[b] // b's calls wait for a probe
		w.clk.Advance(interval)
		a.sync()
		b.sync()
	}
	if len(held) == 0 {
		t.Fatalf("b ran no probe in 5 syncs while a held the lease idle: a %+v, b %+v",
			coord.Of(a.b).Window(), coord.Of(b.b).Window())
	}
	if n := len(held) + count(probes(2, a, b)); n != 2 {
		t.Fatalf("%d probes ran across the cluster, want 2", n)
	}
	for _, pm := range held {
		pm.Record(ok)
	}
	b.wantState(circuitbreaker.StateClosed)
	b.sync()
	a.sync()
	a.wantState(circuitbreaker.StateClosed)
}

// cutOff is a go-redis hook that fails every exchange while on: one pod's
// own Redis trouble (a partition), the others' Redis answering.
type cutOff struct{ on atomic.Bool }

var errCutOff = errors.New("dial tcp: connection refused")

func (h *cutOff) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cutOff) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			cmd.SetErr(errCutOff)
			return errCutOff
		}
		return next(ctx, cmd)
	}
}
func (h *cutOff) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			for _, c := range cmds {
				c.SetErr(errCutOff)
			}
			return errCutOff
		}
		return next(ctx, cmds)
	}
}

// A pod that turned HALF_OPEN while its Redis was away probes alone, with
// every probe its own. Once Redis answers again it has no lease to take:
// before, it took the round's probes at every sync for nothing (its breaker
// could not use them), and a pod that turned HALF_OPEN with Redis
// answering, in the same round, found none left for as long as the first
// stayed HALF_OPEN.
func TestAPodHalfOpenAloneTakesNoLeaseOnceRedisAnswers(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	cut := new(cutOff)
	a.rdb.AddHook(cut)
	a.calls(6, fail)
	a.sync()
	b.sync() // both open until the same end
	cut.on.Store(true)
	_ = a.c.Sync(t.Context()) // a's Redis is away
	w.clk.Advance(openWait)
	a.wantState(circuitbreaker.StateHalfOpen)
	b.wantState(circuitbreaker.StateHalfOpen)
	cut.on.Store(false)
	var held []permit
	for i := 0; i < 5 && len(held) == 0; i++ {
		a.sync() // a gets no call
		b.sync()
		held = probes(2, b)[b]
		w.clk.Advance(interval)
	}
	if len(held) != 2 {
		t.Fatalf("b ran %d probes in 5 syncs, want 2: a %+v, b %+v", len(held),
			coord.Of(a.b).Window(), coord.Of(b.b).Window())
	}
}

// Redis lost the round's count of leased probes (flushed, evicted,
// restarted empty) while a holder's probes were out. The holder renewed a
// lease that was no longer there (PEXPIRE of nothing), and the next pod to
// lease took the whole limit again: twice the limit out. Now the holder
// writes its count back at its next sync, unless a count is there: a pod
// that leases after that finds the limit taken. (A pod that leases between
// the loss and the holder's sync still gets a second limit: the count is
// all the cluster knows.)
func TestALeaseRedisLostIsWrittenBackByItsHolder(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	openAll(t, w, a, b)
	a.sync() // a leases both probes
	b.sync()
	held := probes(2, a)[a]
	if len(held) != 2 {
		t.Fatalf("a holds %d probes, want 2", len(held))
	}
	if err := w.admin().FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	a.sync() // a's probes are still out: it renews its lease
	b.sync()
	if n := count(probes(5, b)); n != 0 {
		t.Fatalf("b leased %d probes while a's 2 were out, with a limit of 2", n)
	}
	for _, pm := range held {
		pm.Record(ok)
	}
	a.wantState(circuitbreaker.StateClosed)
}
