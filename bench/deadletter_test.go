package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

// B14: the dead-letter queue. What a deferred call costs (Defer: the entry
// encoded, the bound checked and the entry stored durably) next to the
// floor of its store — one synced bbolt commit of the same bytes, one XADD
// of the same bytes — and how many replays a second one key drains. The
// Redis server is a real redis-server on loopback, once with the durable
// configuration the docs ask for (appendonly yes, appendfsync always) and
// once without persistence.

var dlQuiet = deadletter.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// dlConfig lifts the bounds out of the way of a benchmark.
var dlConfig = deadletter.Config{MaxEntries: deadletter.MaxMaxEntries, MaxBytes: deadletter.MaxMaxBytes,
	ReplayRate: deadletter.MaxReplayRate}

func dlEntry() deadletter.Entry {
	return deadletter.Entry{Key: "pkg.Svc", Method: "/pkg.Svc/Notify", Payload: make([]byte, 256),
		Metadata: map[string][]string{"x-request-id": {"0123456789abcdef"}}}
}

// dlStores are the stores B14 measures, each with the floor it is compared
// with: a function that stores blob once, as cheaply as the store's
// medium allows with the same durability.
type dlStore struct {
	name  string
	open  func(b *testing.B) deadletter.Store
	floor func(b *testing.B) func(blob []byte) error
}

// dlStores starts the two redis-servers for the benchmark top, which
// stops them when it ends.
func dlStores(top *testing.B) []dlStore {
	plain, aof := redistest.Start(top), redistest.Start(top, redistest.Persistent())
	redisOf := func(b *testing.B, durable bool) *redis.Client {
		srv := plain
		if durable {
			srv = aof
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		b.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	var ns atomic.Int64
	redisStore := func(durable bool) func(b *testing.B) deadletter.Store {
		return func(b *testing.B) deadletter.Store {
			s, err := redisstore.New(redisOf(b, durable), redisstore.WithNamespace("b14-"+strconv.FormatInt(ns.Add(1), 10)))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	xadd := func(durable bool) func(b *testing.B) func([]byte) error {
		return func(b *testing.B) func([]byte) error {
			rdb := redisOf(b, durable)
			ctx := context.Background()
			return func(blob []byte) error {
				return rdb.XAdd(ctx, &redis.XAddArgs{Stream: "b14-floor", Values: []any{"e", blob}}).Err()
			}
		}
	}
	return []dlStore{
		{
			name: "bolt",
			open: func(b *testing.B) deadletter.Store {
				s, err := boltstore.Open(filepath.Join(b.TempDir(), "dl.db"))
				if err != nil {
					b.Fatal(err)
				}
				return s
			},
			floor: func(b *testing.B) func([]byte) error {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "floor.db"), 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = db.Close() })
				var seq uint64
				return func(blob []byte) error {
					return db.Update(func(tx *bolt.Tx) error {
						bk, err := tx.CreateBucketIfNotExists([]byte("w"))
						if err != nil {
							return err
						}
						seq++
						return bk.Put(binary.BigEndian.AppendUint64(nil, seq), blob)
					})
				}
			},
		},
		{name: "redis-aof-always", open: redisStore(true), floor: xadd(true)},
		{name: "redis-no-persistence", open: redisStore(false), floor: xadd(false)},
	}
}

func BenchmarkDeadLetterDefer(b *testing.B) {
	ctx := context.Background()
	blob, _ := deadletter.Entry{ID: deadletter.NewID(), Key: "pkg.Svc", Method: "/pkg.Svc/Notify",
		Payload: make([]byte, 256), Metadata: dlEntry().Metadata, Enqueued: time.Now()}.MarshalBinary()
	for _, st := range dlStores(b) {
		b.Run("store="+st.name+"/impl=meshless", func(b *testing.B) {
			store := st.open(b)
			defer store.Close()
			q, err := deadletter.New(store, dlConfig, dlQuiet, deadletter.WithInterval(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			_ = q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error { return circuitbreaker.ErrOpen })
			e := dlEntry()
			b.ReportAllocs()
			for b.Loop() {
				if err := q.Defer(ctx, e, circuitbreaker.ErrOpen); !errors.Is(err, deadletter.ErrDeferred) {
					b.Fatal(err)
				}
			}
		})
		b.Run("store="+st.name+"/impl=floor", func(b *testing.B) {
			put := st.floor(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := put(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeadLetterReplay drains b.N entries of one key through a no-op
// handler, the pace set to its maximum, and reports replays a second.
func BenchmarkDeadLetterReplay(b *testing.B) {
	ctx := context.Background()
	lim := dlConfig.Limits()
	for _, st := range dlStores(b) {
		b.Run("store="+st.name, func(b *testing.B) {
			store := st.open(b)
			defer store.Close()
			for i := 0; i < b.N; i++ {
				e := dlEntry()
				e.ID, e.Enqueued = deadletter.NewID(), time.Now()
				if err := store.Append(ctx, e, lim); err != nil {
					b.Fatal(err)
				}
			}
			q, err := deadletter.New(store, dlConfig, dlQuiet, deadletter.WithInterval(time.Hour))
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			var n atomic.Int64
			done := make(chan struct{})
			b.ResetTimer()
			start := time.Now()
			_ = q.Handle("pkg.Svc", func(context.Context, deadletter.Entry) error {
				if n.Add(1) == int64(b.N) {
					close(done)
				}
				return nil
			})
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "replays/s")
		})
	}
}

// BenchmarkDeadLetterGuard: what a Guard adds to an event that succeeds
// through a closed breaker (it looks whether entries wait, to kick a round).
func BenchmarkDeadLetterGuard(b *testing.B) {
	ctx := context.Background()
	noopEvent := func(context.Context, deadletter.Entry) error { return nil }
	b.Run("impl=breaker", func(b *testing.B) {
		br, _ := circuitbreaker.New(circuitbreaker.WithName("orders"))
		defer br.Close()
		e := dlEntry()
		b.ReportAllocs()
		for b.Loop() {
			_ = br.Execute(ctx, func(ctx context.Context) error { return noopEvent(ctx, e) })
		}
	})
	b.Run("impl=guard", func(b *testing.B) {
		br, _ := circuitbreaker.New(circuitbreaker.WithName("orders"))
		defer br.Close()
		store, _ := boltstore.Open(filepath.Join(b.TempDir(), "dl.db"))
		defer store.Close()
		q, _ := deadletter.New(store, dlConfig, dlQuiet, deadletter.WithInterval(time.Hour))
		defer q.Close()
		g, err := deadletter.NewGuard(q, br, noopEvent)
		if err != nil {
			b.Fatal(err)
		}
		e := dlEntry()
		b.ReportAllocs()
		for b.Loop() {
			_ = g.Do(ctx, e)
		}
	})
}
