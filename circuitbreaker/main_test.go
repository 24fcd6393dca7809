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

// call runs one call that takes d and ends with outcome o. It reports
// whether the breaker admitted it.
func (h *harness) call(o resilience.Outcome, d time.Duration) bool {
	h.t.Helper()
	p, err := h.cb.Acquire(context.Background())
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
