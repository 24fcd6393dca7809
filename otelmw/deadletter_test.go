package otelmw_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/otelmw"
)

var _ deadletter.Listener = (*otelmw.DeadLetterListener)(nil)

func dlKey(k string) attribute.KeyValue { return attribute.String("meshless.deadletter.key", k) }
func dlEvent(k, ev string) string {
	return enc(dlKey(k), attribute.String("meshless.deadletter.event", ev))
}
func dlState(k, st string) string {
	return enc(dlKey(k), attribute.String("meshless.deadletter.state", st))
}

// A queue reports through the listener: events as counters, depth and age
// as gauges read when the SDK collects.
func TestDeadLetterListenerRecordsAQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := newProvider(t)
		l, err := otelmw.NewDeadLetterListener(mp)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		q, err := deadletter.New(deadlettertest.NewStore(nil), deadletter.Config{MaxEntries: 3, MaxReplays: 1}, deadletter.WithListener(l))
		if err != nil {
			t.Fatal(err)
		}
		answer := circuitbreaker.ErrOpen
		_ = q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error {
			if string(e.Payload) == "poison" {
				return errors.New("boom")
			}
			return answer
		})
		for _, p := range []string{"poison", "a", "b", "refused"} {
			_ = q.Defer(t.Context(), deadletter.Entry{Key: "pkg.Svc", Payload: []byte(p)}, circuitbreaker.ErrOpen)
		}
		time.Sleep(90 * time.Second)
		synctest.Wait()
		ms := collect(t, r)
		sameValues(t, "meshless.deadletter.depth", values(t, ms["meshless.deadletter.depth"]), map[string]float64{
			dlState("pkg.Svc", "waiting"): 2, dlState("pkg.Svc", "parked"): 1,
		})
		sameValues(t, "meshless.deadletter.oldest.age", values(t, ms["meshless.deadletter.oldest.age"]), map[string]float64{
			enc(dlKey("pkg.Svc")): 90,
		})
		answer = nil
		q.Kick("pkg.Svc")
		time.Sleep(time.Second)
		synctest.Wait()
		ms = collect(t, r)
		sameValues(t, "meshless.deadletter.entries", values(t, ms["meshless.deadletter.entries"]), map[string]float64{
			dlEvent("pkg.Svc", "deferred"): 3, dlEvent("pkg.Svc", "refused"): 1,
			dlEvent("pkg.Svc", "parked"): 1, dlEvent("pkg.Svc", "replayed"): 2,
		})
		sameValues(t, "meshless.deadletter.depth", values(t, ms["meshless.deadletter.depth"]), map[string]float64{
			dlState("pkg.Svc", "waiting"): 0, dlState("pkg.Svc", "parked"): 1,
		})
		for name, unit := range map[string]string{"meshless.deadletter.entries": "{entry}", "meshless.deadletter.depth": "{entry}", "meshless.deadletter.oldest.age": "s"} {
			if got := ms[name].Unit; got != unit {
				t.Errorf("%s unit %q, want %q", name, got, unit)
			}
		}
		_ = q.Close()
		if m, ok := collect(t, r)["meshless.deadletter.depth"]; ok && len(values(t, m)) != 0 {
			t.Fatalf("gauges of a closed queue still reported: %v", values(t, m))
		}
	})
}

func TestDeadLetterListenerBoundsKeysAndEvents(t *testing.T) {
	mp, r := newProvider(t)
	l, _ := otelmw.NewDeadLetterListener(mp)
	defer l.Close()
	l.Entries("k", "made-up", 2)
	l.Entries("k", "deferred", 0) // nothing
	for i := range 1100 {
		l.Entries("svc"+strconv.Itoa(i), "deferred", 1)
	}
	got := values(t, collect(t, r)["meshless.deadletter.entries"])
	if got[dlEvent("k", "_OTHER")] != 2 {
		t.Fatalf("an unknown event: %v", got[dlEvent("k", "_OTHER")])
	}
	if len(got) != 1001 || got[dlEvent("_OTHER", "deferred")] != 101 {
		t.Fatalf("%d series, _OTHER = %v; want 1001 and 101", len(got), got[dlEvent("_OTHER", "deferred")])
	}
	// Two queues on one key: the larger figures; unwatching is idempotent.
	stop1 := l.Watch("k", func() (int64, int64, time.Duration) { return 3, 1, time.Second })
	stop2 := l.Watch("k", func() (int64, int64, time.Duration) { return 5, 0, 2 * time.Second })
	sameValues(t, "depth", values(t, collect(t, r)["meshless.deadletter.depth"]), map[string]float64{
		dlState("k", "waiting"): 5, dlState("k", "parked"): 1,
	})
	stop2()
	stop2()
	sameValues(t, "depth", values(t, collect(t, r)["meshless.deadletter.depth"]), map[string]float64{
		dlState("k", "waiting"): 3, dlState("k", "parked"): 1,
	})
	stop1()
}

func TestDeadLetterListenerEntriesDoNotAllocate(t *testing.T) {
	mp, _ := newProvider(t)
	l, _ := otelmw.NewDeadLetterListener(mp)
	defer l.Close()
	l.Entries("pkg.Svc", "deferred", 1)
	if n := testing.AllocsPerRun(100, func() { l.Entries("pkg.Svc", "deferred", 1) }); n != 0 {
		t.Fatalf("Entries allocates %v times", n)
	}
}
