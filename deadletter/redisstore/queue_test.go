package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Queue-level tests against a real redis-server. Time is a fake clock that
// each handler advances past the replay pace, so no test waits on the wall
// clock; the tests wait for events a listener reports.

// counter is a Listener that signals when an event reaches a count.
type counter struct {
	mu     sync.Mutex
	counts map[string]int
	want   map[string]int
	done   map[string]chan struct{}
}

func newCounter() *counter {
	return &counter{counts: map[string]int{}, want: map[string]int{}, done: map[string]chan struct{}{}}
}

// at returns a channel closed once event has been counted n times.
func (c *counter) at(event string, n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.counts[event] >= n {
		close(ch)
		return ch
	}
	c.want[event], c.done[event] = n, ch
	return ch
}

func (c *counter) Entries(_, event string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[event] += n
	if ch := c.done[event]; ch != nil && c.counts[event] >= c.want[event] {
		close(ch)
		delete(c.done, event)
	}
}

func (c *counter) Watch(string, func() (int64, int64, time.Duration)) func() { return func() {} }

func (c *counter) get(event string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[event]
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-t.Context().Done():
		t.Fatalf("the test ended before %s", what)
	}
}

// pump moves clk on by the queues' interval whenever idle queues wait on
// it (at least n timers pending: every key's goroutine idle), so that
// rounds that ended on a refusal or a lease held by another pod run again.
// It stops when the test ends.
func pump(t *testing.T, clk *resiliencetest.Clock, n int) {
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			clk.WaitPending(n)
			select {
			case <-stop:
				return
			default:
			}
			clk.Advance(deadletter.MinInterval)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		for range n {
			clk.NewTimer(time.Hour) // wakes WaitPending
		}
		<-stopped
	})
}

func queue(t *testing.T, store deadletter.Store, clk *resiliencetest.Clock, l deadletter.Listener, owner string) *deadletter.Queue {
	t.Helper()
	q, err := deadletter.New(store, deadletter.Config{Store: deadletter.StoreRedis},
		deadletter.WithClock(clk), deadletter.WithListener(l), deadletter.WithOwner(owner),
		deadletter.WithInterval(deadletter.MinInterval), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// Two pods (two queues, two clients) on one stream: each entry is replayed
// with success exactly once, in the order it was deferred, although the
// replays move from one pod to the other whenever a round ends.
func TestTwoPodsNeverReplayAnEntryTwiceAfterItSucceeded(t *testing.T) {
	srv := redistest.Start(t)
	clk := resiliencetest.NewClock(time.Now())
	const n = 120
	ns := "pods"
	var (
		mu       sync.Mutex
		order    []string
		byPod    = map[string]int{}
		replayed = newCounter()
		blocked  = true // while true, every replay is refused: the breaker is open
	)
	handler := func(pod string) deadletter.Handler {
		return func(ctx context.Context, e deadletter.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			clk.Advance(time.Second) // past the pace; fires the other pod's timer too
			if blocked || len(order)%7 == 6 {
				order = append(order, "") // a refusal every 7th replay ends the round
				return circuitbreaker.ErrOpen
			}
			order = append(order, e.ID)
			byPod[pod]++
			return nil
		}
	}
	var qs []*deadletter.Queue
	for _, pod := range []string{"pod-a", "pod-b"} {
		q := queue(t, open(t, client(t, srv), ns), clk, replayed, pod)
		if err := q.Handle("pkg.Svc", handler(pod)); err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	var want []string
	for i := range n {
		e := entry(i)
		if err := qs[i%2].Defer(t.Context(), e, circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
		want = append(want, e.ID)
	}
	done := replayed.at(deadletter.EventReplayed, n)
	mu.Lock()
	blocked = false
	mu.Unlock()
	pump(t, clk, 2)
	wait(t, done, "every entry was replayed")
	for _, q := range qs {
		_ = q.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	got := slices.DeleteFunc(slices.Clone(order), func(id string) bool { return id == "" })
	if !slices.Equal(got, want) {
		t.Fatalf("successful replays %v, want each entry once, in order", got)
	}
	if byPod["pod-a"] == 0 || byPod["pod-b"] == 0 {
		t.Fatalf("replays by pod %v: the test wants both pods to take turns", byPod)
	}
	if st, _ := open(t, client(t, srv), ns).Stats(context.Background(), "pkg.Svc"); st.Waiting != 0 || st.Parked != 0 {
		t.Fatalf("left in Redis: %+v", st)
	}
}

// redis-server killed in the middle of a replay round (AOF, appendfsync
// always): every entry is replayed after it comes back; the one whose
// success could not be recorded is replayed again (at least once).
func TestRedisKilledMidReplayLosesNothing(t *testing.T) {
	srv := redistest.Start(t, redistest.Persistent())
	clk := resiliencetest.NewClock(time.Now())
	events := newCounter()
	store := open(t, client(t, srv), "kill")
	q := queue(t, store, clk, events, "pod")
	const n = 30
	var (
		mu     sync.Mutex
		seen   = map[string]int{}
		killed = make(chan struct{})
	)
	open := true
	err := q.Handle("pkg.Svc", func(ctx context.Context, e deadletter.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		clk.Advance(time.Second)
		if open {
			return circuitbreaker.ErrOpen
		}
		seen[e.ID]++
		if len(seen) == 10 && seen[e.ID] == 1 {
			srv.Kill() // the call succeeded; its acknowledgement cannot reach Redis
			close(killed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := q.Defer(t.Context(), entry(i), circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatal(err)
		}
	}
	done := events.at(deadletter.EventReplayed, n)
	mu.Lock()
	open = false
	mu.Unlock()
	q.Kick("pkg.Svc")
	wait(t, killed, "redis-server was killed")
	srv.Restart()
	pump(t, clk, 1)
	wait(t, done, "every entry was replayed")
	_ = q.Close()
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if seen[entry(i).ID] == 0 {
			t.Errorf("entry %s lost", entry(i).ID)
		}
	}
	if lost := events.get(deadletter.EventExpired) + events.get(deadletter.EventParked) + events.get(deadletter.EventDropped); lost != 0 {
		t.Fatalf("%d entries expired, parked or dropped", lost)
	}
	if st, err := store.Stats(context.Background(), "pkg.Svc"); err != nil || st.Waiting != 0 {
		t.Fatalf("left waiting: %+v %v", st, err)
	}
}

// Metadata that is not on the allow-list is never sent to Redis: neither
// the stream's bytes nor the append-only file hold it.
func TestMetadataOffTheAllowListNeverReachesRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Persistent())
	rdb := client(t, srv)
	store := open(t, rdb, "md")
	q, err := deadletter.New(store, deadletter.Config{Store: deadletter.StoreRedis, Metadata: deadletter.Allow("x-request-id")}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_ = q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen })
	md := map[string][]string{
		"x-request-id":  {"REQUEST-ID-KEPT-4711"},
		"authorization": {"Bearer SECRET-TOKEN-0815"},
		"cookie":        {"session=SECRET-COOKIE-42"},
	}
	if err := q.Defer(t.Context(), deadletter.Entry{Key: "pkg.Svc", Metadata: md}, circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatal(err)
	}
	msgs, err := rdb.XRange(t.Context(), "md:dl:{pkg.Svc}:w", "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("the stream: %v %v", msgs, err)
	}
	stream := []byte(fmt.Sprint(msgs[0].Values))
	var aof []byte
	_ = filepath.WalkDir(srv.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			aof = append(aof, b...)
		}
		return nil
	})
	for name, raw := range map[string][]byte{"stream": stream, "append-only file": aof} {
		if !bytes.Contains(raw, []byte("REQUEST-ID-KEPT-4711")) {
			t.Fatalf("the %s lacks the allowed metadata: the check would prove nothing", name)
		}
		for _, secret := range []string{"SECRET-TOKEN-0815", "SECRET-COOKIE-42", "authorization", "cookie"} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("the %s holds %q", name, secret)
			}
		}
	}
}

var _ redis.UniversalClient = (*redis.Client)(nil)
