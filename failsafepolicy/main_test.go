package failsafepolicy_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

var errUnavailable = errors.New("unavailable")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t testing.TB, opts ...bulkhead.Option) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// held is permits of a bulkhead, taken through its gate contract.
type held struct {
	b   *bulkhead.Bulkhead
	pms []resilience.Permit
}

// hold takes n permits of b.
func hold(t testing.TB, b *bulkhead.Bulkhead, n int) held {
	t.Helper()
	h := held{b: b, pms: make([]resilience.Permit, n)}
	for i := range h.pms {
		_, pm, err := b.Enter(context.Background())
		if err != nil {
			t.Fatalf("Enter %d of %d: %v", i+1, n, err)
		}
		h.pms[i] = pm
	}
	return h
}

func releaseAll(h held) {
	for _, pm := range h.pms {
		_ = h.b.Exit(context.Background(), pm, resilience.Result{})
	}
}

func noop(context.Context) error { return nil }
