package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// A hedged call whose copy panics is over for the hedging policy:
// meshless.hedging.attempts counts the copies it sent, with no winner
// (EventHedgeDone, Winner 0, resilience.ErrPanicked), and the copies'
// context is ended, before the panic goes on up unchanged. Before, the
// call was never reported, and was missing from the metric.
func TestAHedgedCallThatPanicsIsReportedOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		panic int // the copy that panics
		sent  int
	}{
		{"first copy, no hedge sent", 1, 1},
		{"second copy", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
					c.MaxAttempts = 2
					c.HedgingDelay = time.Second
				})), retry.WithHedgeObserver(obs))
				var first context.Context
				r := func() (r any) {
					defer func() { r = recover() }()
					_, _ = h.Run(t.Context(), func(ctx context.Context, n int) error {
						if n == 1 {
							first = ctx
						}
						if n == tc.panic {
							panic("copy")
						}
						<-ctx.Done() // the first copy waits for the second's end
						return ctx.Err()
					})
					return nil
				}()
				if r != "copy" {
					t.Fatalf("recovered %v, want the copy's panic unchanged", r)
				}
				if first.Err() == nil {
					t.Error("the copies' context is still live after the call panicked")
				}
				done := obs.Events(resilience.EventHedgeDone)
				if len(done) != 1 || done[0].Attempt != tc.sent || done[0].Winner != 0 || !errors.Is(done[0].Err, resilience.ErrPanicked) {
					t.Fatalf("EventHedgeDone %+v, want one: %d copies sent, no winner, resilience.ErrPanicked", done, tc.sent)
				}
			})
		})
	}
}
