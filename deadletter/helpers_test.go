package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errBoom = errors.New("boom")
	// errOpen stands for the rejection that made a call defer.
	errOpen = circuitbreaker.ErrOpen
	quiet   = deadletter.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
)

// listener records a queue's events and gauges.
type listener struct {
	mu      sync.Mutex
	counts  map[string]int // "key/event"
	readers map[string]func() (int64, int64, time.Duration)
}

func newListener() *listener {
	return &listener{counts: map[string]int{}, readers: map[string]func() (int64, int64, time.Duration){}}
}

func (l *listener) Entries(key, event string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[key+"/"+event] += n
}

func (l *listener) Watch(key string, read func() (int64, int64, time.Duration)) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers[key] = read
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.readers, key)
	}
}

func (l *listener) count(key, event string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[key+"/"+event]
}

func (l *listener) gauges(key string) (waiting, parked int64, age time.Duration) {
	l.mu.Lock()
	read := l.readers[key]
	l.mu.Unlock()
	if read == nil {
		return -1, -1, -1
	}
	return read()
}

// replays records the entries a handler saw, in order.
type replays struct {
	mu  sync.Mutex
	ids []string
}

func (r *replays) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

func (r *replays) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

func newQueue(t *testing.T, store deadletter.Store, cfg deadletter.Config, opts ...deadletter.Option) *deadletter.Queue {
	t.Helper()
	q, err := deadletter.New(store, cfg, append([]deadletter.Option{quiet}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func deferN(t *testing.T, q *deadletter.Queue, key string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%02d", key, i)
		err := q.Defer(t.Context(), deadletter.Entry{ID: id, Key: key, Payload: []byte(id)}, errOpen)
		if !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("Defer %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// gate is a handler whose answer a test switches: nil, a rejection or a
// failure.
type gate struct {
	mu  sync.Mutex
	err error
	r   replays
}

func (g *gate) set(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.err = err
}

func (g *gate) handle(ctx context.Context, e deadletter.Entry) error {
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	if id, ok := deadletter.ReplayID(ctx); !ok || id != e.ID {
		return fmt.Errorf("replay id %q %v, want %q", id, ok, e.ID)
	}
	if err == nil {
		g.r.add(e.ID)
	}
	return err
}

var _ deadletter.Store = (*deadlettertest.Store)(nil)
