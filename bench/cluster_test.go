package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/redistest"
)

// Cluster mode: a call through a breaker costs the same with cluster mode
// on as off (no Redis on the call path), while gobreaker v2's distributed
// breaker goes to its store on every call. The sync's Redis commands are
// counted by the server (INFO stats).

// commands returns the server's total_commands_processed.
func commands(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no total_commands_processed in INFO stats")
	return 0
}

func newRedis(b *testing.B, srv *redistest.Server) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func BenchmarkClusterCall(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	b.Run("impl=meshless/cluster=off", func(b *testing.B) {
		cb := newMeshless(b)
		defer cb.Close()
		b.ReportAllocs()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
	})
	b.Run("impl=meshless/cluster=on", func(b *testing.B) {
		cb := newMeshless(b)
		defer cb.Close()
		rdb := newRedis(b, srv)
		c, err := cluster.New(rdb, cluster.WithConfig(namespaced("bench-call")))
		if err != nil {
			b.Fatal(err)
		}
		c.Add(cb)
		c.Start() // syncing every second in the background, as in production
		defer c.Close()
		if err := c.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		before := commands(b, rdb)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			_ = cb.Execute(ctx, noop)
		}
		b.StopTimer()
		// Background syncs (about one a second) are all the Redis work.
		b.ReportMetric(float64(commands(b, rdb)-before-1)/float64(b.N), "redis-cmds/op")
	})
	b.Run("impl=gobreaker-distributed", func(b *testing.B) {
		rdb := newRedis(b, srv)
		store := &redisStore{rdb: rdb}
		cb, err := gobreaker.NewDistributedCircuitBreaker[any](store, gobreaker.Settings{Name: "bench", Timeout: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		before := commands(b, rdb)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			_, _ = cb.Execute(gbNoop)
		}
		b.StopTimer()
		b.ReportMetric(float64(commands(b, rdb)-before-1)/float64(b.N), "redis-cmds/op")
	})
}

// BenchmarkClusterSync is one sync of an instance with n breakers: one
// pipelined round trip; redis-cmds/op counts the commands Redis ran per
// sync. load=idle: no breaker's window moves between syncs; load=busy:
// every breaker's window moves before every sync (one call each, outside
// the timer: in a window of 11 calls, a success and then failures and
// successes in turn, each call evicts one of the other outcome and so
// changes the counts, and the failure rate stays under the threshold).
func BenchmarkClusterSync(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	for _, n := range []int{1, 10, 100, 1000} {
		for _, load := range []string{"idle", "busy"} {
			b.Run("breakers="+strconv.Itoa(n)+"/load="+load, func(b *testing.B) {
				rdb := newRedis(b, srv)
				c, err := cluster.New(rdb, cluster.WithConfig(namespaced("bench-sync-"+strconv.Itoa(n)+"-"+load)))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				cbs := make([]*circuitbreaker.Breaker, n)
				for i := range cbs {
					cb, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
						c.SlidingWindowSize = 11
						c.MinimumNumberOfCalls = 11
						c.FailureRateThreshold = 100
					})), circuitbreaker.WithName("svc"+strconv.Itoa(i)))
					if err != nil {
						b.Fatal(err)
					}
					defer cb.Close()
					_ = cb.Execute(ctx, noop)
					c.Add(cb)
					cbs[i] = cb
				}
				if err := c.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				calls := 0
				before := commands(b, rdb)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if load == "busy" {
						b.StopTimer()
						calls++
						f := noop
						if calls%2 == 1 {
							f = fail
						}
						for _, cb := range cbs {
							_ = cb.Execute(ctx, f)
						}
						b.StartTimer()
					}
					if err := c.Sync(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(commands(b, rdb)-before-1)/float64(b.N), "redis-cmds/op")
				for _, cb := range cbs {
					if cb.State() != circuitbreaker.StateClosed {
						b.Fatalf("%s is %v: the benchmark measures closed breakers", cb.Name(), cb.State())
					}
				}
			})
		}
	}
}

// redisStore is gobreaker's SharedDataStore on go-redis, as its example
// builds one: a lock key taken with SET NX (retried), the state in a plain
// key.
type redisStore struct{ rdb *redis.Client }

func (s *redisStore) Lock(name string) error {
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		ok, err := s.rdb.SetNX(ctx, "gb:lock:"+name, "1", 5*time.Second).Result()
		if err != nil || ok {
			return err
		}
		time.Sleep(100 * time.Microsecond) // another holder: try again, as a lock client does
	}
	return errors.New("lock not acquired")
}

func (s *redisStore) Unlock(name string) error {
	return s.rdb.Del(context.Background(), "gb:lock:"+name).Err()
}

func (s *redisStore) GetData(name string) ([]byte, error) {
	v, err := s.rdb.Get(context.Background(), "gb:data:"+name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

func (s *redisStore) SetData(name string, data []byte) error {
	return s.rdb.Set(context.Background(), "gb:data:"+name, data, 0).Err()
}

// namespaced is cluster's default configuration in namespace ns.
func namespaced(ns string) cluster.Config {
	c := cluster.DefaultConfig()
	c.Namespace = ns
	return c
}
