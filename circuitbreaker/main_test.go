package circuitbreaker_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives one breaker with a fake clock and keeps its events.
type harness struct {
	t   *testing.T
	clk *resiliencetest.Clock
	obs *resiliencetest.Observer
	cb  *circuitbreaker.Breaker
}

func newHarness(t *testing.T, opts ...circuitbreaker.Option) *harness {
	t.Helper()
	h := &harness{t: t, clk: resiliencetest.NewClock(t0), obs: new(resiliencetest.Observer)}
	// The name goes last: a WithConfig in opts sets every setting, the name
	// included.
	opts = append([]circuitbreaker.Option{
		circuitbreaker.WithClock(h.clk),
		circuitbreaker.WithObserver(h.obs),
	}, opts...)
	opts = append(opts, circuitbreaker.WithName("test"))
	cb, err := circuitbreaker.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.cb = cb
	return h
}

// permit is a call that a breaker admitted through its gate (Enter),
// reported later, once, with Record (Exit), as meshless's engine drives it:
// the call's duration runs from Enter to Record on the breaker's clock.
type permit struct {
	cb    *circuitbreaker.Breaker
	clk   resilience.Clock
	ctx   context.Context
	pm    resilience.Permit
	start time.Time
}

// enter asks cb, whose clock is clk, to admit one call.
func enter(cb *circuitbreaker.Breaker, clk resilience.Clock, ctx context.Context) (permit, error) {
	ctx, pm, err := cb.Enter(ctx)
	return permit{cb: cb, clk: clk, ctx: ctx, pm: pm, start: clk.Now()}, err
}

// enter asks the harness's breaker to admit one call.
func (h *harness) enter(ctx context.Context) (permit, error) { return enter(h.cb, h.clk, ctx) }

// Record reports the admitted call's outcome, ended now.
func (p permit) Record(o resilience.Outcome) {
	end := p.clk.Now()
	_ = p.cb.Exit(p.ctx, p.pm, resilience.Result{Outcome: o, Duration: end.Sub(p.start), End: end})
}

// call runs one call that takes d and ends with outcome o. It reports
// whether the breaker admitted it.
func (h *harness) call(o resilience.Outcome, d time.Duration) bool {
	h.t.Helper()
	p, err := h.enter(context.Background())
	if err != nil {
		return false
	}
	h.clk.Advance(d)
	p.Record(o)
	return true
}

func (h *harness) calls(n int, o resilience.Outcome, d time.Duration) {
	h.t.Helper()
	for range n {
		if !h.call(o, d) {
			h.t.Fatalf("call rejected in state %v", h.cb.State())
		}
	}
}

func (h *harness) wantState(want circuitbreaker.State) {
	h.t.Helper()
	if got := h.cb.State(); got != want {
		h.t.Fatalf("state = %v, want %v (metrics %+v)", got, want, h.cb.Metrics())
	}
}

// transitions returns the transitions observed so far as "FROM->TO(reason)".
func (h *harness) transitions() []string {
	var out []string
	for _, e := range h.obs.Events(resilience.EventTransition) {
		out = append(out, e.From.String()+"->"+e.To.String()+"("+e.Reason.String()+")")
	}
	return out
}

const (
	ok   = resilience.Success
	fail = resilience.Failure
	ign  = resilience.Ignored
)
