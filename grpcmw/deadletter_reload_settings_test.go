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

// A reload that changes a key's deadLetter section while an entry waits,
// and no live call of the key comes (a key whose breaker is open often
// has none: its callers' work is what waits): the key's queue takes the
// new settings at its next replay, which goes through the chain, and the
// entry is replayed under them (reload.md). Here maxAge drops from 24h to
// 1m and the entry, 2m old when the breaker closes, expires instead of
// being replayed; switched off, the queue still replays what it holds.
func TestAReloadAppliesNewDeadLetterSettingsToTheEntriesWaiting(t *testing.T) {
	tests := []struct {
		name, section string
		replayed      bool
	}{
		{name: "maxAge: 1m", section: "maxAge: 1m", replayed: false},
		{name: "enabled: false", section: "enabled: false", replayed: true},
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
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, waitDurationInOpenState: 1h, maxWaitDurationInOpenState: 0s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  deadLetter: { path: ` + path + `, ` + section + ` }
`
				}
				client, chain, _, stop := observed(t, f, yaml("maxAge: 24h"))
				defer stop()
				e := &matrixEnv{f: f, client: client, chain: chain}
				for range 2 {
					_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}) // the breaker opens
				}
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("a")}})
				if !errors.Is(err, deadletter.ErrDeferred) {
					t.Fatalf("call a: %v, want it deferred", err)
				}
				time.Sleep(2 * time.Minute) // the queue's rounds meet the open breaker
				reload(t, chain, yaml(tt.section))
				time.Sleep(15 * time.Second) // a round after the reload: the key's next lookup
				r.set(false)
				e.breaker(t).Reset() // closed: the key's queue replays now
				synctest.Wait()
				got := r.log()
				replayed := slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "a ") })
				if replayed != tt.replayed || len(got) > 1 {
					t.Errorf("the backend served %v after a reload to %s; want the entry replayed: %v", got, tt.section, tt.replayed)
				}
			})
		})
	}
}
