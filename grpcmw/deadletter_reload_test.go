package grpcmw_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
)

// A reload that changes a key's deadLetter settings (here maxAge), then the
// key's next replay round (its 10s timer) before any live call of the
// method: the replay goes through the chain, whose lookup of the method —
// not yet built in the new configuration — builds it under the engine's
// lock, and building it replaces the key's queue: dlqueues.Queues.Queue
// closes the old queue and waits for its goroutine, which is the very
// goroutine doing the replay. It waits for itself for ever, holding the
// engine's locks: no replay, and every later first call of a method, Kick,
// Breaker and Close of the chain hang.
func TestAReplayAfterAReloadDoesNotDeadlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	var (
		mu     sync.Mutex
		down   = true
		served = make(chan string, 10)
	)
	f := new(faultServer)
	f.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return nil, errors.New("down")
		}
		served <- string(req.GetPayload().GetBody())
		return &testgrpc.SimpleResponse{}, nil
	})
	yaml := func(maxAge string) string {
		return `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  deadLetter: { path: ` + path + `, maxAge: ` + maxAge + ` }
`
	}
	client, chain, _, stop := observed(t, f, yaml("24h"))
	call := func(body string) error {
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}})
		return err
	}
	for range 2 {
		_ = call("fail") // the breaker opens
	}
	if err := call("a"); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatalf("call a: %v, want it deferred", err)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	cfg, err := grpcmw.ParseConfig([]byte(yaml("12h")))
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	// No live call now: the key's queue replays "a" on its own timer (10s).
	select {
	case got := <-served:
		if got != "a" {
			t.Fatalf("served %q", got)
		}
		stop()
	case <-time.After(40 * time.Second): // a failure detector: the round comes 10s after the last one
		t.Fatal("no replay reached the backend in 40s: the replay round deadlocked on itself (dlqueues.Queues.Queue closes the queue that runs the replay, under the engine's lock)")
	}
}

// A deadLetter section a reload adds replays its key's calls as soon as
// the key's breaker closes, as one New was given does (they waited for the
// queue's 10s round: the replay on close was wired only when New's
// configuration had a deadLetter section).
func TestADeadLetterAReloadAddsReplaysWhenTheBreakerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &replayLog{down: true}
		f := new(faultServer)
		f.setUnary(r.handler)
		path := filepath.Join(t.TempDir(), "dl.db")
		base := `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
`
		client, chain, _, stop := observed(t, f, base)
		defer stop()
		cfg, err := grpcmw.ParseConfig([]byte(base + "  deadLetter: { path: " + path + " }\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		call := func(body string) error {
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}})
			return err
		}
		for range 2 {
			_ = call("fail") // the breaker opens
		}
		if err := call("a"); !errors.Is(err, deadletter.ErrDeferred) {
			t.Fatalf("call a: %v, want it deferred", err)
		}
		r.set(false)
		time.Sleep(1500 * time.Millisecond) // half-open
		if err := call("probe"); err != nil {
			t.Fatalf("the probe: %v", err)
		}
		synctest.Wait() // the close replays a, long before the queue's 10s round
		if got := r.log(); !slices.Contains(got, "probe") || len(got) != 2 || !strings.HasPrefix(got[1], "a ") {
			t.Fatalf("the backend served %v by 1.5s, want the probe, then a replayed", got)
		}
	})
}
