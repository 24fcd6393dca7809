package grpcmw_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
)

// replayLog is a backend that fails while down and records, in order, the
// calls it served: their payload and replay id.
type replayLog struct {
	mu     sync.Mutex
	down   bool
	served []string // "payload id" of each call served OK
	seen   int
}

func (r *replayLog) handler(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen++
	if r.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	id := md.Get(deadletter.ReplayIDHeader)
	entry := string(req.GetPayload().GetBody())
	if len(id) == 1 {
		entry += " " + id[0]
	}
	r.served = append(r.served, entry)
	return &testgrpc.SimpleResponse{}, nil
}

func (r *replayLog) set(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

func (r *replayLog) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.served...)
}

// Issue 22: a call the open breaker rejects is kept in the dead-letter
// queue, its caller told DEFERRED (never a fake OK); when the backend is
// back the entries are replayed through the same chain, oldest first, each
// once, with a stable meshless-replay-id, and the allowed metadata only.
func TestDeferredCallsAreReplayedWhenTheBreakerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &replayLog{down: true}
		f := new(faultServer)
		f.setUnary(r.handler)
		path := filepath.Join(t.TempDir(), "dl.db")
		client, chain, _, stop := observed(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  deadLetter: { path: `+path+`, metadata: [x-request-id] }
`)
		defer stop()
		call := func(body string) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "req-"+body, "authorization", "secret")
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}})
			return err
		}
		for i := range 4 { // the breaker opens
			if err := call("fail"); status.Code(err) != codes.Unavailable || grpcmw.RejectionReason(err) != "" {
				t.Fatalf("call %d: %v, want the backend's UNAVAILABLE", i, err)
			}
		}
		for _, body := range []string{"a", "b", "c"} {
			err := call(body)
			if !errors.Is(err, deadletter.ErrDeferred) || grpcmw.RejectionReason(err) != "DEFERRED" || status.Code(err) != codes.Unavailable {
				t.Fatalf("call %s: %v, want UNAVAILABLE with reason DEFERRED, errors.Is ErrDeferred", body, err)
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte("req-a")) || bytes.Contains(raw, []byte("secret")) {
			t.Fatalf("the store holds the allowed x-request-id: %v; the authorization it must never hold: %v",
				bytes.Contains(raw, []byte("req-a")), bytes.Contains(raw, []byte("secret")))
		}
		r.set(false)
		time.Sleep(time.Minute) // the breaker half-opens; replays probe, close it, and drain
		synctest.Wait()
		got := r.log()
		if len(got) != 3 {
			t.Fatalf("the backend served %v, want a, b and c, once each", got)
		}
		ids := map[string]bool{}
		for i, want := range []string{"a", "b", "c"} {
			body, id, _ := cutSpace(got[i])
			if body != want || id == "" || ids[id] {
				t.Fatalf("replay %d: %q, want %s with a replay id of its own (all: %v)", i, got[i], want, got)
			}
			ids[id] = true
		}
		if cb, _ := chain.Breaker(testService); cb.State().String() != "CLOSED" {
			t.Errorf("the breaker is %v after the replays, want closed", cb.State())
		}
	})
}

func cutSpace(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Issue 22: entries a previous run left are replayed by the next run, once
// its chain has a connection to replay them on (its first call).
func TestDeferredCallsOfAPreviousRunAreReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &replayLog{down: true}
		f := new(faultServer)
		f.setUnary(r.handler)
		path := filepath.Join(t.TempDir(), "dl.db")
		yaml := `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, waitDurationInOpenState: 1h, maxWaitDurationInOpenState: 0s }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  deadLetter: { path: ` + path + ` }
`
		client, _, _, stop := observed(t, f, yaml)
		for range 2 {
			client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}) //nolint:errcheck // opens the breaker
		}
		for _, body := range []string{"x", "y"} {
			if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}}); !errors.Is(err, deadletter.ErrDeferred) {
				t.Fatalf("call %s: %v, want it deferred", body, err)
			}
		}
		stop() // the process ends; its breaker, open for an hour, with it
		r.set(false)
		client, _, _, stop = observed(t, f, yaml)
		defer stop()
		if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("live")}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // replays are paced (replayRate)
		synctest.Wait()
		var replays []string
		for _, e := range r.log() {
			if e != "live" {
				replays = append(replays, e)
			}
		}
		if len(replays) != 2 {
			t.Fatalf("the backend served %v, want the live call, and x and y replayed once each", r.log())
		}
		for i, want := range []string{"x", "y"} {
			if body, id, _ := cutSpace(replays[i]); body != want || id == "" {
				t.Fatalf("replay %d: %q, want %s with its replay id", i, replays[i], want)
			}
		}
	})
}
