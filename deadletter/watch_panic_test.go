package deadletter_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

// panickyWatch is a listener whose first Watch panics.
type panickyWatch struct {
	*listener
	n atomic.Int32
}

func (p *panickyWatch) Watch(key string, read func() (int64, int64, time.Duration)) func() {
	if p.n.Add(1) == 1 {
		panic("watch")
	}
	return p.listener.Watch(key, read)
}

// A Handle whose listener panics in Watch panics and leaves nothing behind:
// the key is not registered without its replay rounds, so a second Handle
// of it registers it and its entries are replayed. Before, the key stayed
// registered with no rounds: the second Handle said "already has a
// handler" and nothing was ever replayed.
func TestAHandleWhoseWatchPanicsLeavesNoKeyBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &panickyWatch{listener: newListener()}
		q := newQueue(t, deadlettertest.NewStore(nil), deadletter.Config{}, deadletter.WithListener(l))
		var g gate
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }()
			_ = q.Handle("pkg.Svc", g.handle)
			return false
		}()
		if !panicked {
			t.Fatal("Handle did not pass its listener's panic on")
		}
		if err := q.Handle("pkg.Svc", g.handle); err != nil {
			t.Fatalf("Handle after a Watch that panicked: %v", err)
		}
		synctest.Wait() // the first round, at once, is over
		want := deferN(t, q, "pkg.Svc", 3)
		q.Kick("pkg.Svc")
		time.Sleep(time.Second) // bubble time: 3 replays at 50/s
		synctest.Wait()
		if got := g.r.got(); !slices.Equal(got, want) {
			t.Fatalf("replayed %v, want %v", got, want)
		}
	})
}
