package otelmw_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// meshless.hedging.attempts counts every copy, the first included, by
// which copy's answer the call returned; each copy after the first adds a
// meshless.hedge span event.
func TestHedgingAttemptsAndSpanEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, r := newObserver(t)
		unavailable := status.Error(codes.Unavailable, "down")
		h, err := retry.NewHedge(retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = time.Hour
		})), retry.WithHedgeName("pkg.Svc/Get"), retry.WithHedgeObserver(obs),
			retry.WithNonFatal(func(err error) bool { return errors.Is(err, unavailable) }))
		if err != nil {
			t.Fatal(err)
		}
		method := attribute.String("rpc.method", "pkg.Svc/Get")
		winner := attribute.Key("meshless.hedging.winner")
		m := collect(t, r)["meshless.hedging.attempts"]
		if m.Unit != "{attempt}" {
			t.Errorf("unit %q", m.Unit)
		}
		sameValues(t, "at attach", values(t, m), map[string]float64{
			enc(method, winner.String("first")): 0, enc(method, winner.String("hedge")): 0, enc(method, winner.String("none")): 0,
		})
		events := spanEvents(t, func(ctx context.Context) {
			// Copy 1 fails non-fatally, copy 2 (sent at once) answers.
			_, _ = h.Run(ctx, func(_ context.Context, n int) error {
				if n == 1 {
					return unavailable
				}
				return nil
			})
		})
		_ = h.Execute(context.Background(), func(context.Context) error { return nil })         // the first wins
		_ = h.Execute(context.Background(), func(context.Context) error { return unavailable }) // none: 3 copies
		sameValues(t, "after 3 calls", values(t, collect(t, r)["meshless.hedging.attempts"]), map[string]float64{
			enc(method, winner.String("first")): 1, enc(method, winner.String("hedge")): 2, enc(method, winner.String("none")): 3,
		})
		want := []string{"meshless.hedge " + enc(
			attribute.Int("meshless.hedging.attempt", 2), attribute.Float64("meshless.hedging.delay", 0), method,
			attribute.String("error.type", "UNAVAILABLE"), attribute.String("rpc.response.status_code", "UNAVAILABLE"))}
		if !slices.Equal(events, want) {
			t.Fatalf("span events\n%v\nwant\n%v", events, want)
		}
	})
}

// Recording a hedged call's end allocates nothing.
func TestHedgingRecordingDoesNotAllocate(t *testing.T) {
	obs, _ := newObserver(t)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindHedging, Name: "pkg.Svc/Get"})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		rec.Record(ctx, resilience.Event{Type: resilience.EventHedgeDone, Attempt: 2, Winner: 2})
		rec.Record(ctx, resilience.Event{Type: resilience.EventHedge, Attempt: 2})
	}); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
