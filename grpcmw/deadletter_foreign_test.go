package grpcmw_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/grpcmw"
)

// watchLog is a dead-letter listener that records the keys it is handed a
// gauge of: one per queue the chain opened.
type watchLog struct {
	mu   sync.Mutex
	keys []string
}

func (w *watchLog) Entries(string, string, int) {}

func (w *watchLog) Watch(key string, _ func() (int64, int64, time.Duration)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, key)
	return func() {}
}

func (w *watchLog) watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.keys))
}

// fillKeys leaves one entry of each key in the bbolt file at path, as an
// earlier run, another client or a hand edit would.
func fillKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, k := range keys {
		e := deadletter.Entry{ID: deadletter.NewID(), Key: k, Method: "/grpc.testing.TestService/UnaryCall", Payload: []byte(k), Enqueued: time.Now()}
		if err := st.Append(context.Background(), e, deadletter.DefaultConfig().Limits()); err != nil {
			t.Fatal(err)
		}
	}
}

// A chain resumed every key its store listed whose settings keep calls:
// with deadLetter at the defaults, that is every key, so a key no call of
// this client can be kept under (a service this program neither configures
// nor links, a method its service does not have, written by another client
// of a shared store or by hand) got a queue of its own at New (a goroutine,
// a replay round every 10s, a gauge series), up to 10,000 of them, and its
// entries were replayed on this client's connection. Such keys are now left
// in the store.
func TestResumeSkipsKeysNoCallOfTheChainIsKeptUnder(t *testing.T) {
	for _, tc := range []struct {
		name, keyBy string
		keys, want  []string
	}{
		{
			name: "keyBy service", keyBy: "service",
			keys: []string{"grpc.testing.TestService", "_OTHER", "foreign.Svc", "grpc.testing.TestService/UnaryCall"},
			want: []string{"_OTHER", "grpc.testing.TestService"},
		},
		{
			name: "keyBy method", keyBy: "method",
			keys: []string{"grpc.testing.TestService/UnaryCall", "grpc.testing.TestService/NoSuchMethod", "_OTHER/_OTHER",
				"foreign.Svc/Do", "foreign.Svc/_OTHER", "grpc.testing.TestService/_OTHER", "grpc.testing.TestService"},
			want: []string{"_OTHER/_OTHER", "grpc.testing.TestService/UnaryCall"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dl.db")
			fillKeys(t, path, tc.keys...)
			cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { keyBy: ` + tc.keyBy + ` }
  deadLetter: { path: ` + path + ` }
`))
			if err != nil {
				t.Fatal(err)
			}
			w := &watchLog{}
			chain, err := grpcmw.New(cfg, grpcmw.WithDeadLetterListener(w))
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			if got := w.watched(); !slices.Equal(got, tc.want) {
				t.Fatalf("queues opened at New: %q, want %q", got, tc.want)
			}
		})
	}
}

// A replay made the call its entry names, whatever key it was kept under:
// an entry of a store shared with another client, or written by hand,
// under one key but naming a method whose calls this chain keeps under
// another (keyBy: method here: EmptyCall's key holding a UnaryCall) was
// sent to that method, paced, leased and counted as the first key's. A
// replay now makes only a call the chain would have kept under the
// entry's key; another is a failed replay, parked after maxReplays, never
// sent.
func TestAReplayMakesOnlyACallOfItsEntrysKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &replayLog{}
		f := new(faultServer)
		f.setUnary(r.handler)
		path := filepath.Join(t.TempDir(), "dl.db")
		st, err := boltstore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		lim := deadletter.DefaultConfig().Limits()
		payload := func(s string) []byte {
			b, err := proto.Marshal(&testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(s)}})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		for _, e := range []deadletter.Entry{
			{Key: "grpc.testing.TestService/EmptyCall", Method: "/grpc.testing.TestService/UnaryCall", Payload: payload("misfiled")},
			{Key: "grpc.testing.TestService/UnaryCall", Method: "/grpc.testing.TestService/UnaryCall", Payload: payload("kept")},
		} {
			e.ID, e.Enqueued = deadletter.NewID(), time.Now()
			if err := st.Append(context.Background(), e, lim); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
		client, _, _, stop := observed(t, f, `
defaults:
  circuitBreaker: { keyBy: method }
  retry: { enabled: false }
  deadLetter: { path: `+path+`, maxReplays: 2 }
`)
		defer stop()
		if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("live")}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // replays are paced, failed ones backed off
		synctest.Wait()
		var replays []string
		for _, e := range r.log() {
			if body, _, _ := cutSpace(e); body != "live" {
				replays = append(replays, body)
			}
		}
		if !slices.Equal(replays, []string{"kept"}) {
			t.Fatalf("replays served: %q, want only the entry kept under UnaryCall's key", replays)
		}
	})
}

// WithMaxMethods bounds the methods a chain keeps policies, and so queues,
// for; the start-up resume did not read it: a store listing more keys than
// that, every one a real method's, gave each a queue (a goroutine, a round
// every 10s), up to the store's 10,000. Resume now opens at most that many
// queues; the other keys wait in the store for their method's next call.
func TestResumeOpensNoMoreQueuesThanWithMaxMethods(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	fillKeys(t, path, "grpc.testing.TestService/EmptyCall", "grpc.testing.TestService/UnaryCall",
		"grpc.testing.TestService/CacheableUnaryCall")
	cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { keyBy: method }
  deadLetter: { path: ` + path + ` }
`))
	if err != nil {
		t.Fatal(err)
	}
	w := &watchLog{}
	chain, err := grpcmw.New(cfg, grpcmw.WithDeadLetterListener(w), grpcmw.WithMaxMethods(2))
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	if got := w.watched(); len(got) != 2 {
		t.Fatalf("queues opened at New: %q, want 2 (WithMaxMethods)", got)
	}
}
