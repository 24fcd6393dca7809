package bulkhead_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
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

// permit is a call that a bulkhead admitted through its gate (Enter), ended
// later, once, through Exit, as meshless's engine drives it: Release for a
// call that ran its course, Drop for one that ended early (no latency
// sample), Done with the call's error to let the bulkhead choose. The zero
// permit belongs to no bulkhead: it ends through a nil *Bulkhead's Exit,
// which does nothing.
type permit struct {
	b   *bulkhead.Bulkhead
	ctx context.Context
	pm  resilience.Permit
}

// enter asks b to admit one call.
func enter(b *bulkhead.Bulkhead, ctx context.Context) (permit, error) {
	ctx, pm, err := b.Enter(ctx)
	if err != nil {
		return permit{}, err
	}
	return permit{b: b, ctx: ctx, pm: pm}, nil
}

func (p permit) Release() { p.Done(nil) }

// Drop ends the call as one that ended early: cancelled.
func (p permit) Drop() { p.Done(context.Canceled) }

func (p permit) Done(err error) { _ = p.b.Exit(p.ctx, p.pm, resilience.Result{Err: err}) }

// hold takes n permits and returns them, failing the test if any is refused.
func hold(t testing.TB, b *bulkhead.Bulkhead, n int) []permit {
	t.Helper()
	ps := make([]permit, n)
	for i := range ps {
		p, err := enter(b, context.Background())
		if err != nil {
			t.Fatalf("Enter %d of %d: %v", i+1, n, err)
		}
		ps[i] = p
	}
	return ps
}

func releaseAll(ps []permit) {
	for _, p := range ps {
		p.Release()
	}
}
