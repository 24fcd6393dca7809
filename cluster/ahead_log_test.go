package cluster_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// repairLog keeps the messages of the repairs a cluster logs.
type repairLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *repairLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *repairLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "repaired") {
		l.mu.Lock()
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "problem" {
				msg += " [" + a.Value.String() + "]"
			}
			return true
		})
		l.msgs = append(l.msgs, msg)
		l.mu.Unlock()
	}
	return nil
}
func (l *repairLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *repairLog) WithGroup(string) slog.Handler      { return l }

// An open record written by a pod whose clock runs minutes ahead ends past
// a reader's longest wait. A reader that opens while it is in Redis claims
// over it (a reader may also bound its TTL), a repair that was logged as
// "repaired a key of the namespace that held what no instance writes",
// which sends an operator looking for garbage or a foreign writer; the
// message now says what the record is: an open past this pod's longest
// wait, written by a pod whose clock runs ahead (or whose wait is longer).
func TestTheRepairOfAnOpenFromAPodWhoseClockIsAheadSaysSo(t *testing.T) {
	w := newWorld(t)
	ahead := resiliencetest.NewClock(t0.Add(10 * time.Minute))
	a := w.podWith("a", false, []circuitbreaker.Option{circuitbreaker.WithClock(ahead)}, cluster.WithClock(ahead))
	logs := new(repairLog)
	b := w.pod("b", false, cluster.WithLogger(slog.New(logs)))
	a.sync()
	b.sync()
	a.calls(6, fail)
	a.sync() // claims an open ending 30 s after a's now: 10 min 30 s after b's
	b.sync() // bounds the record's TTL
	b.wantState(circuitbreaker.StateOpen)
	w.clk.Advance(maxOwnWait + interval) // b's adopted open is over; the record still says open
	b.sync()
	b.calls(6, fail)
	b.sync() // claims over the record
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.msgs) == 0 {
		t.Fatal("no repair logged")
	}
	for _, m := range logs.msgs {
		if strings.Contains(m, "no instance writes") || !strings.Contains(m, "clock") {
			t.Errorf("repair logged as %q: want it to say the open ends past this pod's longest wait, a clock ahead", m)
		}
	}
}
