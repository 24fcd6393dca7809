package failsafepolicy_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/bulkhead"
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

// hold takes n permits of b.
func hold(t testing.TB, b *bulkhead.Bulkhead, n int) []bulkhead.Permit {
	t.Helper()
	ps := make([]bulkhead.Permit, n)
	for i := range ps {
		p, err := b.Acquire(context.Background())
		if err != nil {
			t.Fatalf("Acquire %d of %d: %v", i+1, n, err)
		}
		ps[i] = p
	}
	return ps
}

func releaseAll(ps []bulkhead.Permit) {
	for _, p := range ps {
		p.Release()
	}
}
func noop(context.Context) error { return nil }
