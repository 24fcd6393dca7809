package deadlettertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStoreKeepsTheContract(t *testing.T) {
	deadlettertest.TestStore(t, func(*testing.T) deadletter.Store { return deadlettertest.NewStore(nil) })
}

func TestLeaseExpiresOnTheClock(t *testing.T) {
	clk := resiliencetest.NewClock(deadlettertest.T0)
	s := deadlettertest.NewStore(clk)
	e := deadletter.Entry{ID: "1", Key: "k", Enqueued: deadlettertest.T0}
	if err := s.Append(t.Context(), e, deadletter.Limits{MaxEntries: 1, MaxBytes: 1 << 10}); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(t.Context(), "k", "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := l.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := l.Ack(t.Context(), head); !errors.Is(err, deadletter.ErrLeaseLost) {
		t.Fatalf("Ack after the lease expired: %v, want ErrLeaseLost", err)
	}
	l2, err := s.Lease(t.Context(), "k", "b", time.Second)
	if err != nil {
		t.Fatalf("another holder after expiry: %v", err)
	}
	if got, ok, _ := l2.Next(t.Context()); !ok || got.ID != "1" {
		t.Fatalf("the entry was not left for the next holder: %v %v", got.ID, ok)
	}
}

func ExampleNewStore() {
	store := deadlettertest.NewStore(nil)
	q, err := deadletter.New(store, deadletter.Config{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	_ = q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error { return nil })
}
