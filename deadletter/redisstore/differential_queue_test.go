package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// The queue over each store, on a fake clock, one script: deferrals under
// both bounds, rounds whose replays succeed, fail or are refused, entries
// aged past maxAge, parked after maxReplays, requeued and purged by an
// operator, the queue and its store closed and opened again (Redis killed
// and restarted). What the handler saw, the events counted and the gauges
// must be the same.

// roundStore tells the test when a round is over: the round's last call is
// the read of the key's figures.
type roundStore struct {
	deadletter.Store
	rounds chan struct{}
}

func (s *roundStore) Stats(ctx context.Context, key string) (deadletter.Stats, error) {
	st, err := s.Store.Stats(ctx, key)
	s.rounds <- struct{}{}
	return st, err
}

type events struct {
	mu     sync.Mutex
	counts map[string]int
	read   func() (int64, int64, time.Duration)
}

func (l *events) Entries(_, event string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[event] += n
}

func (l *events) Watch(_ string, read func() (int64, int64, time.Duration)) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read = read
	return func() {}
}

func (l *events) show() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, p, age := l.read()
	return fmt.Sprintf("%v gauges waiting=%d parked=%d age=%v", l.counts, w, p, age)
}

// side is one queue over one store.
type side struct {
	t       *testing.T
	name    string
	reopen  func() deadletter.Store
	cfg     deadletter.Config
	clk     *resiliencetest.Clock
	store   *roundStore
	q       *deadletter.Queue
	ev      *events
	plan    []error // the answers of the next replays; nil when empty
	seen    []string
	started bool
}

const qkey = "pkg.Svc"

func (s *side) start() {
	s.store = &roundStore{Store: s.reopen(), rounds: make(chan struct{}, 1)}
	q, err := deadletter.New(s.store, s.cfg, deadletter.WithClock(s.clk), deadletter.WithListener(s.ev),
		deadletter.WithInterval(time.Minute), deadletter.WithOwner("pod"), quiet)
	if err != nil {
		s.t.Fatal(err)
	}
	s.q = q
	if err := q.Handle(qkey, s.handle); err != nil {
		s.t.Fatal(err)
	}
	s.settle() // the first round, at once
}

func (s *side) stop() {
	_ = s.q.Close()
	_ = s.store.Close()
}

// settle waits for the round that runs to end and its key to wait again.
func (s *side) settle() {
	<-s.store.rounds
	s.clk.WaitPending(1)
}

func (s *side) handle(_ context.Context, e deadletter.Entry) error {
	// A replay takes a millisecond: the next one's turn (replayRate) has
	// come when it ends, so that the round waits on no timer.
	s.clk.Advance(time.Millisecond)
	s.seen = append(s.seen, fmt.Sprintf("%s:%d", e.ID, e.Replays))
	if len(s.plan) == 0 {
		return nil
	}
	err := s.plan[0]
	s.plan = s.plan[1:]
	return err
}

var errDown = errors.New("backend down")

func TestQueuesOverBothStoresAgree(t *testing.T) {
	srv := redistest.Start(t, redistest.Persistent())
	rdb := client(t, srv)
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			cfg := deadletter.Config{
				MaxEntries: 4 + rnd.IntN(6), MaxBytes: int64(1024 + rnd.IntN(1024)),
				MaxAge: time.Duration(1+rnd.IntN(10)) * time.Minute, MaxReplays: 1 + rnd.IntN(3),
				ReplayRate: 1000, Metadata: deadletter.Allow("x-request-id", "x-bin"),
			}
			t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			path := filepath.Join(t.TempDir(), "dl.db")
			ns := fmt.Sprint("dq", seed)
			sides := []*side{
				{t: t, name: "bolt", cfg: cfg, clk: resiliencetest.NewClock(t0), ev: &events{counts: map[string]int{}},
					reopen: func() deadletter.Store {
						s, err := boltstore.Open(path)
						if err != nil {
							t.Fatal(err)
						}
						return s
					}},
				{t: t, name: "redis", cfg: cfg, clk: resiliencetest.NewClock(t0), ev: &events{counts: map[string]int{}},
					reopen: func() deadletter.Store {
						s, err := redisstore.New(rdb, redisstore.WithNamespace(ns))
						if err != nil {
							t.Fatal(err)
						}
						return s
					}},
			}
			for _, s := range sides {
				s.start()
			}
			defer func() {
				for _, s := range sides {
					s.stop()
				}
			}()
			var log []string
			restarts := 0
			for step := range 60 {
				var desc string
				switch op := rnd.IntN(10); {
				case op < 4: // a deferral
					size := rnd.IntN(400)
					md := map[string][]string{"X-Request-Id": {fmt.Sprint(step)}, "x-bin": {"\x00\xff"}, "authorization": {"secret"}}
					desc = fmt.Sprintf("defer e%02d (%d bytes)", step, size)
					for _, s := range sides {
						e := deadletter.Entry{ID: fmt.Sprintf("e%02d", step), Key: qkey, Payload: make([]byte, size), Metadata: md}
						err := s.q.Defer(t.Context(), e, circuitbreaker.ErrOpen)
						desc += fmt.Sprintf(" %s:%v", s.name, errors.Is(err, deadletter.ErrDeferred))
					}
				case op < 7: // a round, with a plan of answers
					var plan []error
					for range rnd.IntN(4) {
						switch rnd.IntN(3) {
						case 0:
							plan = append(plan, nil)
						case 1:
							plan = append(plan, errDown)
						case 2:
							plan = append(plan, circuitbreaker.ErrOpen)
						}
					}
					desc = fmt.Sprintf("round %v", plan)
					for _, s := range sides {
						s.plan = slices.Clone(plan)
						s.q.Kick(qkey)
						s.settle()
					}
				case op < 8: // time passes: entries age
					d := time.Duration(rnd.IntN(5*60)) * time.Second
					desc = fmt.Sprint("sleep ", d)
					for _, s := range sides {
						s.clk.Step(d)
					}
				case op < 9: // an operator requeues or purges the first parked entry
					purge := rnd.IntN(2) == 0
					desc = fmt.Sprint("operator purge=", purge)
					for _, s := range sides {
						parked, err := s.q.List(t.Context(), qkey, deadletter.Parked, "", 1)
						if err != nil || len(parked) == 0 {
							desc += " " + s.name + ":none"
							continue
						}
						if purge {
							err = s.q.Purge(t.Context(), qkey, parked[0].ID)
						} else {
							err = s.q.Requeue(t.Context(), qkey, parked[0].ID)
						}
						desc += fmt.Sprintf(" %s:%s %v", s.name, parked[0].ID, err)
						if !purge && err == nil {
							s.settle() // the round a requeue kicks
						}
					}
				default: // the service restarts; Redis crashes once
					if restarts >= 2 {
						continue
					}
					restarts++
					desc = "restart"
					for _, s := range sides {
						s.stop()
					}
					srv.Kill()
					srv.Restart()
					for _, s := range sides {
						s.start()
					}
				}
				log = append(log, fmt.Sprintf("%d %s", step, desc))
				b, r := sides[0], sides[1]
				if !slices.Equal(b.seen, r.seen) || b.ev.show() != r.ev.show() {
					t.Fatalf("after:\n%s\nbolt  replayed %v %s\nredis replayed %v %s", strings.Join(log, "\n"),
						b.seen, b.ev.show(), r.seen, r.ev.show())
				}
			}
			if testing.Verbose() {
				t.Logf("%s\n%v", strings.Join(log, "\n"), sides[0].ev.show())
			}
		})
	}
}
