package grpcmw_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/deadletter"
)

// A call in flight across a reload, waiting out a backoff when the reload
// comes, whose retries run out after it: it is deferred (its key's queue is
// still the one it started with), its caller told DEFERRED, and the entry
// is replayed once the backend is back — whether the reload changed the
// queue's settings (a new queue on the same store at the key's next call,
// which replays it), switched the section off (the queue made keeps
// replaying what it holds), or went to B and back to A (reload.md, "Dead-
// letter queues"). Nothing deferred is lost, nothing replayed twice.
func TestADeferredCallInFlightAcrossAReloadIsReplayed(t *testing.T) {
	tests := []struct {
		name    string
		reloads []string // the deadLetter sections reloaded in turn
	}{
		{name: "maxAge changed", reloads: []string{"maxAge: 48h"}},
		{name: "switched off", reloads: []string{"enabled: false"}},
		{name: "to B and back to A", reloads: []string{"maxAge: 48h", "maxAge: 24h"}},
		{name: "switched off and on again", reloads: []string{"enabled: false", "maxAge: 24h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &replayLog{down: true}
				f := new(faultServer)
				f.setUnary(r.handler)
				path := filepath.Join(t.TempDir(), "dl.db")
				yaml := func(section string) string {
					return `
retryThrottling: { enabled: false }
defaults:
  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }
  adaptiveThrottling: { enabled: false }
  deadLetter: { path: ` + path + `, on: [RETRIES_EXHAUSTED], ` + section + ` }
`
				}
				client, chain, _, stop := observed(t, f, yaml("maxAge: 24h"))
				defer stop()
				ctx := context.Background()
				done := make(chan error, 1)
				go func() {
					_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("a")}})
					done <- err
				}()
				synctest.Wait() // its first attempt failed: it waits out its backoff
				for _, s := range tt.reloads {
					reload(t, chain, yaml(s))
				}
				if err := <-done; !errors.Is(err, deadletter.ErrDeferred) {
					t.Fatalf("the call in flight: %v, want it deferred", err)
				}
				r.set(false)
				// The key's next call: its queue takes the new settings.
				if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("b")}}); err != nil {
					t.Fatalf("a call after the reload: %v", err)
				}
				time.Sleep(25 * time.Second) // the queues' rounds
				synctest.Wait()
				got := r.log()
				n := 0
				for _, s := range got {
					if strings.HasPrefix(s, "a ") {
						n++
					}
				}
				if n != 1 || !slices.Contains(got, "b") {
					t.Errorf("the backend served %q; want the deferred call a replayed once, and b", got)
				}
			})
		})
	}
}
