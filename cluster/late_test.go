package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// fakeRedis is a go-redis hook that answers every command itself and never
// dials: a cluster in a synctest bubble, whose exchanges take the bubble's
// time. pipeline answers each pipeline (nil: every command's zero reply,
// at once); it may block on a channel of the bubble.
type fakeRedis struct {
	mu       sync.Mutex
	pipeline func(ctx context.Context, cmds []redis.Cmder) error
}

func (f *fakeRedis) answer(fn func(ctx context.Context, cmds []redis.Cmder) error) {
	f.mu.Lock()
	f.pipeline = fn
	f.mu.Unlock()
}

func (f *fakeRedis) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *fakeRedis) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { return nil }
}
func (f *fakeRedis) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f.mu.Lock()
		fn := f.pipeline
		f.mu.Unlock()
		if fn == nil {
			return nil
		}
		return fn(ctx, cmds)
	}
}

// lateRecorder is a Listener and a slog.Handler that keeps what the cluster
// reports once Close has returned (after), and can hold the first warning
// (hold, when set) after saying it began (warned).
type lateRecorder struct {
	mu          sync.Mutex
	closed      bool
	after       []string
	remoteOpens int
	warned      chan struct{}
	hold        chan struct{}
	once        sync.Once
}

func newLateRecorder() *lateRecorder { return &lateRecorder{warned: make(chan struct{})} }

func (r *lateRecorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.after = append(r.after, what)
	}
}

func (r *lateRecorder) setClosed() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *lateRecorder) afterClose() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.after...)
}

func (r *lateRecorder) Synced(ok bool) {
	if ok {
		r.note("Synced(ok)")
	} else {
		r.note("Synced(error)")
	}
}

func (r *lateRecorder) Connected(up bool) {
	if up {
		r.note("Connected(true)")
	} else {
		r.note("Connected(false)")
	}
}

func (r *lateRecorder) RemoteOpen(string) {
	r.mu.Lock()
	r.remoteOpens++
	r.mu.Unlock()
	r.note("RemoteOpen")
}

func (r *lateRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *lateRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		r.once.Do(func() {
			close(r.warned)
			if r.hold != nil {
				<-r.hold
			}
		})
	}
	r.note("log: " + rec.Message)
	return nil
}
func (r *lateRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *lateRecorder) WithGroup(string) slog.Handler      { return r }

// lateTimeout is the exchange timeout of the bubbled clusters.
const lateTimeout = 100 * time.Millisecond

// bubbled returns a cluster over fake, with one breaker "svc" (the pods'
// configuration, on the bubble's clock), reporting to r; it is closed
// when the test ends. Call it inside the bubble.
func bubbled(t *testing.T, fake *fakeRedis, r *lateRecorder) (*cluster.Cluster, *circuitbreaker.Breaker) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // never dialled
	rdb.AddHook(fake)
	c, err := cluster.New(rdb, clusterConf(func(c *cluster.Config) { c.Timeout = lateTimeout }),
		cluster.WithInstanceID("a"), cluster.WithListener(r), cluster.WithLogger(slog.New(r)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := circuitbreaker.New(circuitbreaker.WithConfig(podConf()), circuitbreaker.WithName("svc"))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(b)
	t.Cleanup(func() {
		c.Close()
		b.Close()
		_ = rdb.Close()
	})
	return c, b
}

// An exchange whose timeout fires as it ends: the timeout's verdict (Redis
// down: the warning, Connected(false), every breaker local) ran on the
// timer's goroutine, which nothing waited for. It could land after Sync
// returned, after Close returned: a metric and a log line from a closed
// cluster (and, after a later Sync that succeeded, "Redis down" over its
// "up"). Now the exchange ends only once its timeout's verdict has landed.
func TestATimeoutsVerdictLandsBeforeTheSyncEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, r := new(fakeRedis), newLateRecorder()
		r.hold = make(chan struct{})
		c, _ := bubbled(t, fake, r)
		if err := c.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		fake.answer(func(context.Context, []redis.Cmder) error { <-gate; return nil })
		synced := make(chan error, 1)
		go func() { synced <- c.Sync(t.Context()) }()
		<-r.warned  // the timeout fired: its verdict is being reported
		close(gate) // and Redis answers now
		release := sync.OnceFunc(func() { close(r.hold) })
		synctest.Wait() // the exchange has ended
		var err error
		select {
		case err = <-synced: // returned with the verdict still on its way
		default: // Sync waits for the verdict
			release()
			err = <-synced
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sync: %v, want the timeout", err)
		}
		c.Close()
		r.setClosed()
		release()
		synctest.Wait() // whatever was still on its way has landed
		if got := r.afterClose(); len(got) != 0 {
			t.Errorf("reported after Close returned: %q, want nothing", got)
		}
	})
}

// A reply that arrives once the exchange's timeout has fired comes from a
// round already declared failed (every breaker deciding alone, Redis
// counted down): it changes nothing. Before, it was applied all the same:
// an open record read late opened the breaker, behind the verdict.
func TestAReplyAfterTheTimeoutChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, r := new(fakeRedis), newLateRecorder()
		c, b := bubbled(t, fake, r)
		if err := c.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		record := ms(time.Now().Add(openWait)) + " 0 failure_rate b"
		fake.answer(func(_ context.Context, cmds []redis.Cmder) error {
			<-gate
			for _, cmd := range cmds {
				if cmd.Name() == "getrange" {
					cmd.(*redis.StringCmd).SetVal(record) // b opened svc
				}
			}
			return nil
		})
		synced := make(chan error, 1)
		go func() { synced <- c.Sync(t.Context()) }()
		time.Sleep(2 * lateTimeout) // the bubble's time: the timeout fires, Redis has not answered
		synctest.Wait()
		if c.Connected() {
			t.Fatal("still connected past the timeout")
		}
		close(gate) // the late reply
		if err := <-synced; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sync: %v, want the timeout", err)
		}
		if s := b.State(); s != circuitbreaker.StateClosed {
			t.Errorf("state %v after a reply that came past the timeout, want CLOSED: the late reply was applied", s)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.remoteOpens != 0 {
			t.Errorf("%d remote opens reported from a late reply, want 0", r.remoteOpens)
		}
	})
}
