package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// syncClock is a go-redis hook for a cluster in a synctest bubble: it
// answers every command at once, dials nothing (the channel's subscription
// fails), and notes the bubble's time of each sync's exchange (the
// pipeline that writes the presence key, once per sync). failing makes
// every other exchange fail, as a Redis that comes and goes.
type syncClock struct {
	mu      sync.Mutex
	start   time.Time
	failing bool
	at      []time.Duration
	scripts int // the flushes' commands
}

func (s *syncClock) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no Redis in the bubble")
	}
}

// ProcessHook answers the scripts a breaker's own changes run (flushed,
// not synced): an open claimed, no probe leased.
func (s *syncClock) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		if c, ok := cmd.(*redis.Cmd); ok && cmd.Name() == "evalsha" {
			s.mu.Lock()
			s.scripts++
			s.mu.Unlock()
			if cmd.Args()[1] == cluster.ClaimOpenSHA {
				c.SetVal([]any{"", int64(0)})
			} else {
				c.SetVal(int64(0))
			}
		}
		return nil
	}
}

func (s *syncClock) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "set" || !strings.Contains(cmds[0].Args()[1].(string), ":alive:") {
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.at = append(s.at, time.Since(s.start))
		if s.failing && len(s.at)%2 == 0 {
			return errors.New("Redis went away")
		}
		return nil
	}
}

func (s *syncClock) syncs() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...)
}

// runSyncs starts a cluster of cfg with one breaker in a bubble, drives
// the breaker for ten and a half sync intervals (a call every quarter
// interval, two in three failing: its window moves, it opens, turns
// half-open, and each change is flushed), and returns when each sync ran,
// from Start.
func runSyncs(t *testing.T, cfg cluster.Config, failing bool) []time.Duration {
	t.Helper()
	hook := &syncClock{start: time.Now(), failing: failing}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, // never dialled
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	rdb.AddHook(hook)
	c, err := cluster.New(rdb, cluster.WithConfig(cfg), cluster.WithInstanceID("a"),
		cluster.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := circuitbreaker.New(circuitbreaker.WithConfig(podConf(func(c *circuitbreaker.Config) {
		c.WaitDurationInOpenState, c.MaxWaitDurationInOpenState = 3*cfg.SyncInterval, 0
	})), circuitbreaker.WithName("svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c.Add(b)
	c.Start()
	for i := range 42 {
		if _, pm, err := b.Enter(context.Background()); err == nil {
			o := resilience.Success
			if i%3 != 0 {
				o = resilience.Failure
			}
			_ = b.Exit(context.Background(), pm, resilience.Result{Outcome: o, End: time.Now()})
		}
		time.Sleep(cfg.SyncInterval / 4)
	}
	c.Close()
	got := hook.syncs()
	hook.mu.Lock()
	if hook.scripts == 0 {
		t.Error("the breaker's changes ran no script: it did not move")
	}
	hook.mu.Unlock()
	_ = rdb.Close()
	// go-redis's channel goroutine retries the subscription every 100ms:
	// it sees the client closed at its next try.
	time.Sleep(time.Second)
	return got
}

// Syncs come at Start and then once every syncInterval, exactly, and not
// more often: not when the breaker moves (its changes are flushed, not
// synced), not when a sync fails. At both bounds of syncInterval (10ms
// and 1h), at the 1s default that a cluster section without the key
// gets, and at 250ms.
func TestSyncsComeEverySyncInterval(t *testing.T) {
	parsed, err := config.Parse([]byte(`cluster: { redis: { addr: "r:6379" } }`))
	if err != nil {
		t.Fatal(err)
	}
	byDefault, on, err := parsed.ClusterConfig()
	if err != nil || !on || byDefault.SyncInterval != time.Second {
		t.Fatalf("a cluster section without syncInterval: %v, %v, %v; want a sync every 1s", byDefault.SyncInterval, on, err)
	}
	byDefault.Namespace = "test"
	for _, tc := range []struct {
		name string
		cfg  cluster.Config
	}{
		{"minimum", func() cluster.Config {
			c := byDefault
			c.SyncInterval = cluster.MinSyncInterval
			return c
		}()},
		{"250ms", func() cluster.Config {
			c := byDefault
			c.SyncInterval = 250 * time.Millisecond
			return c
		}()},
		{"default", byDefault},
		{"maximum", func() cluster.Config {
			c := byDefault
			c.SyncInterval = cluster.MaxSyncInterval
			return c
		}()},
	} {
		for _, failing := range []bool{false, true} {
			name := tc.name
			if failing {
				name += "/half failing"
			}
			t.Run(name, func(t *testing.T) {
				if tc.cfg.SyncInterval == cluster.MaxSyncInterval && testing.Short() {
					t.Skip("ten hours of the bubble's time: the channel's reconnects take a while")
				}
				synctest.Test(t, func(t *testing.T) {
					got := runSyncs(t, tc.cfg, failing)
					want := make([]time.Duration, 11)
					for i := range want {
						want[i] = time.Duration(i) * tc.cfg.SyncInterval
					}
					if len(got) != len(want) {
						t.Fatalf("%d syncs in 10.5 intervals of %v, at %v; want 11, at %v", len(got), tc.cfg.SyncInterval, got, want)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("syncs at %v, want at %v", got, want)
						}
					}
				})
			})
		}
	}
}

// syncInterval's bounds are inclusive: 10ms and 1h are taken (and run, as
// above), a nanosecond past either is refused, naming the key, by
// cluster.New and by the config section.
func TestSyncIntervalBounds(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{cluster.MinSyncInterval - 1, false},
		{cluster.MinSyncInterval, true},
		{cluster.MaxSyncInterval, true},
		{cluster.MaxSyncInterval + 1, false},
	} {
		c, err := cluster.New(rdb, clusterConf(func(c *cluster.Config) { c.SyncInterval = tc.d }))
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, resilience.ErrInvalidOption) || !strings.Contains(err.Error(), "syncInterval"))) {
			t.Errorf("syncInterval %v: %v, want accepted %v (an error naming syncInterval)", tc.d, err, tc.ok)
		}
		if c != nil {
			c.Close()
		}
		parsed, err := config.Parse([]byte(`cluster: { redis: { addr: "r:6379" }, syncInterval: ` + tc.d.String() + ` }`))
		if err == nil {
			_, _, err = parsed.ClusterConfig()
		}
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "syncInterval")) {
			t.Errorf("cluster.syncInterval: %v in YAML: %v, want accepted %v", tc.d, err, tc.ok)
		}
	}
}
