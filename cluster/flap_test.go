package cluster_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
)

// healthLines records the lines a cluster logs about Redis going away and
// coming back.
type healthLines struct {
	mu    sync.Mutex
	lines []healthLine
}

type healthLine struct {
	down     bool  // "does not answer", else "answers again"
	unlogged int64 // the changes the line says were not logged
}

func (h *healthLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *healthLines) Handle(_ context.Context, r slog.Record) error {
	down := strings.Contains(r.Message, "does not answer")
	if !down && !strings.Contains(r.Message, "answers again") {
		return nil
	}
	l := healthLine{down: down}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "unlogged_changes" {
			l.unlogged = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, l)
	h.mu.Unlock()
	return nil
}
func (h *healthLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *healthLines) WithGroup(string) slog.Handler      { return h }

func (h *healthLines) take() []healthLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.lines
	h.lines = nil
	return out
}

// A Redis that goes away and comes back every few hundred milliseconds
// (a flapping network, a failover loop) does not log a line per change:
// the first three outages and their ends are logged at once, and past those
// at most one line a minute, saying what Redis does now and how many
// changes were not logged. Before, every change was a line: 40 lines for
// 20 flaps in 12 s, 200 a minute at one sync every 300 ms.
func TestAFlappingRedisIsLoggedAtABoundedRate(t *testing.T) {
	w := newWorld(t)
	logs := new(healthLines)
	cut := new(cutOff)
	rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr(), MaxRetries: -1})
	rdb.AddHook(cut)
	p := w.podClient("a", false, rdb, nil, cluster.WithLogger(slog.New(logs)))
	p.sync()
	if got := logs.take(); len(got) != 0 {
		t.Fatalf("the first sync logged %v, want nothing", got)
	}
	flap := func(n int) {
		for range n {
			cut.on.Store(true)
			w.clk.Advance(300 * time.Millisecond)
			if err := p.c.Sync(t.Context()); err == nil {
				t.Fatal("a sync with Redis cut off succeeded")
			}
			cut.on.Store(false)
			w.clk.Advance(300 * time.Millisecond)
			p.sync()
		}
	}
	// 20 flaps in 12 s: the first three outages and their ends, nothing
	// more.
	flap(20)
	got := logs.take()
	if len(got) != 6 {
		t.Fatalf("20 flaps logged %+v, want the first three outages and their ends", got)
	}
	for i, l := range got {
		if l.down != (i%2 == 0) || l.unlogged != 0 {
			t.Fatalf("20 flaps logged %+v, want the first three outages and their ends", got)
		}
	}
	// The minute passes, Redis still answering: one line says so, and how
	// many changes were not logged.
	w.clk.Advance(time.Minute)
	p.sync()
	p.sync()
	if got := logs.take(); len(got) != 1 || got[0].down || got[0].unlogged != 34 {
		t.Fatalf("a minute later: %+v, want one line: Redis answers, 34 changes not logged", got)
	}
	// Still flapping: one line a minute at most, each with the changes not
	// logged since the line before. The line of the minute above came at
	// 72 s: the next may come at 120.3 s, the 161st change of these 200.
	flap(100) // 72 s to 132 s
	if got := logs.take(); len(got) != 1 || !got[0].down || got[0].unlogged != 160 {
		t.Fatalf("a minute of flaps logged %+v, want one line: Redis does not answer, 160 changes not logged", got)
	}
	w.clk.Advance(time.Minute)
	cut.on.Store(true)
	_ = p.c.Sync(t.Context())
	if got := logs.take(); len(got) != 1 || !got[0].down || got[0].unlogged != 39 {
		t.Fatalf("logged %+v, want one line: Redis does not answer, 39 changes not logged", got)
	}
	// Quiet for long enough, an outage and its end are logged at once again.
	cut.on.Store(false)
	w.clk.Advance(10 * time.Minute)
	p.sync()
	logs.take()
	w.clk.Advance(10 * time.Minute)
	flap(1)
	if got := logs.take(); len(got) != 2 || !got[0].down || got[1].down {
		t.Fatalf("an outage after a quiet time logged %+v, want it and its end", got)
	}
}
