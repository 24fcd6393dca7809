package bulkhead_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meshless/meshless/bulkhead"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errUnavailable = errors.New("unavailable")

func noop(context.Context) error { return nil }

func mustNew(t testing.TB, opts ...bulkhead.Option) *bulkhead.Bulkhead {
	t.Helper()
	b, err := bulkhead.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// hold takes n permits and returns them, failing the test if any is refused.
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
