package cluster_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/redistest"
)

// spy is a go-redis hook that counts what a client sends (commands and
// pipelines) once armed: it tells whether a cluster still talks to Redis
// after its Close returned. Dials are not counted: go-redis's pool finishes
// a dial on its own goroutine after the command that asked for it was
// cancelled (by Close, before it returned), which is the client's doing.
type spy struct {
	armed atomic.Bool
	sent  atomic.Int64
}

func (s *spy) note() {
	if s.armed.Load() {
		s.sent.Add(1)
	}
}

func (s *spy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *spy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.note()
		return next(ctx, cmd)
	}
}

func (s *spy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.note()
		return next(ctx, cmds)
	}
}

// spied returns a cluster over a client of srv that s watches, with one
// breaker.
func spied(t *testing.T, srv *redistest.Server, s *spy) *cluster.Cluster {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(s)
	c, err := cluster.New(rdb, clusterConf(), cluster.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := circuitbreaker.New(circuitbreaker.WithName("svc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c.Add(b)
	return c
}

// Start after Close starts nothing: no goroutine, nothing sent to Redis.
// It used to start the sync loop and the channel's listener, the loop
// syncing once with Redis after Close had returned (and the caller had
// perhaps closed the client).
func TestStartAfterCloseStartsNothing(t *testing.T) {
	var s spy
	c := spied(t, redistest.Start(t), &s)
	c.Close()
	s.armed.Store(true)
	before := goleak.IgnoreCurrent()
	c.Start()
	goleak.VerifyNone(t, before) // waits for whatever Start started to end
	if n := s.sent.Load(); n != 0 {
		t.Fatalf("Start after Close sent %d commands to Redis, want none", n)
	}
}

// Start racing Close: either Start comes first and Close waits for what it
// started, or it starts nothing; nothing talks to Redis once Close has
// returned. (Under -race, Start's WaitGroup.Add racing Close's Wait was
// also a reported misuse.)
func TestStartRacingCloseLeavesNothingRunning(t *testing.T) {
	srv := redistest.Start(t)
	for range 50 {
		var s spy
		c := spied(t, srv, &s)
		before := goleak.IgnoreCurrent()
		var wg sync.WaitGroup
		wg.Go(c.Start)
		c.Close()
		s.armed.Store(true) // from here on, nothing may be sent
		wg.Wait()
		goleak.VerifyNone(t, before)
		if n := s.sent.Load(); n != 0 {
			t.Fatalf("%d commands sent to Redis after Close returned", n)
		}
	}
}
