package ratelimiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/ratelimiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errUnavailable = errors.New("unavailable")

func noop(context.Context) error { return nil }

func mustNew(t testing.TB, opts ...ratelimiter.Option) *ratelimiter.Limiter {
	t.Helper()
	l, err := ratelimiter.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// admitAll calls Enter until it is refused and returns how many calls it
// admitted at once. Its calls have a deadline of one nanosecond from now, so
// that a limiter with a timeoutDuration refuses them rather than make them
// wait; run it in a synctest bubble, where that deadline does not pass.
func admitAll(t testing.TB, l *ratelimiter.Limiter) int {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Nanosecond))
	defer cancel()
	n := 0
	for {
		_, _, err := l.Enter(ctx)
		if err != nil {
			if !errors.Is(err, ratelimiter.ErrLimited) {
				t.Fatalf("Enter: %v, want ErrLimited", err)
			}
			return n
		}
		n++
		if n > 1_000_000 {
			t.Fatal("never refused")
		}
	}
}
