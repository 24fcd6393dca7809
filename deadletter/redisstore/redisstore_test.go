package redisstore_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/deadlettertest"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = deadletter.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

var nsSeq atomic.Int64

func client(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// open returns a store in a namespace of its own.
func open(t *testing.T, rdb redis.UniversalClient, ns string) *redisstore.Store {
	t.Helper()
	if ns == "" {
		ns = "t" + strconv.FormatInt(nsSeq.Add(1), 10)
	}
	s, err := redisstore.New(rdb, redisstore.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestKeepsTheStoreContract(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	deadlettertest.TestStore(t, func(t *testing.T) deadletter.Store { return open(t, rdb, "") })
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		ns   string
		want string
	}{
		{name: "nil client", rdb: nil, ns: "x", want: "redis: must not be nil"},
		{name: "empty namespace", rdb: redis.NewClient(&redis.Options{}), ns: "", want: "namespace: must be 1 to 128"},
		{name: "brace", rdb: redis.NewClient(&redis.Options{}), ns: "a{b", want: "namespace: must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rdb != nil {
				defer tc.rdb.Close()
			}
			_, err := redisstore.New(tc.rdb, redisstore.WithNamespace(tc.ns))
			if err == nil || !errorContains(err, tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// A nil option is skipped, as every other constructor of the module skips
// one; it made New panic.
func TestNewSkipsANilOption(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{})
	defer rdb.Close()
	if _, err := redisstore.New(rdb, nil); err != nil {
		t.Fatal(err)
	}
}

func errorContains(err error, s string) bool {
	return err != nil && len(s) > 0 && contains(err.Error(), s)
}

func contains(a, b string) bool { return len(b) <= len(a) && (a[:len(b)] == b || contains(a[1:], b)) }

func entry(i int) deadletter.Entry {
	return deadletter.Entry{ID: fmt.Sprintf("e%03d", i), Key: "pkg.Svc", Payload: []byte{byte(i)}, Enqueued: time.Now()}
}

var lim = deadletter.Config{}.Limits()

// An instance that dies while it replays an entry: once its lease is gone,
// the next holder gets that same entry first (XAUTOCLAIM), then the rest.
func TestTheNextHolderTakesOverADeadInstancesEntry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	s := open(t, rdb, "dead")
	for i := range 3 {
		if err := s.Append(t.Context(), entry(i), lim); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Lease(t.Context(), "pkg.Svc", "pod-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inFlight, _, err := a.Next(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// pod-a dies: no Release; its lease's TTL ends.
	if err := rdb.Del(t.Context(), "dead:dl:{pkg.Svc}:l").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(t.Context(), inFlight); !errors.Is(err, deadletter.ErrLeaseLost) {
		t.Fatalf("an ack after the lease ended: %v, want ErrLeaseLost", err)
	}
	b, err := s.Lease(t.Context(), "pkg.Svc", "pod-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(t.Context())
	var got []string
	for {
		e, ok, err := b.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, e.ID)
		if err := b.Ack(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"e000", "e001", "e002"}; !slices.Equal(got, want) {
		t.Fatalf("pod-b replayed %v, want %v", got, want)
	}
	if n, _ := rdb.XLen(t.Context(), "dead:dl:{pkg.Svc}:w").Result(); n != 0 {
		t.Fatalf("%d entries left in the stream", n)
	}
}

// Whatever is in Redis may be hostile: a counter that is not a number, a
// stream entry that is not an entry, a lease that never expires, a key of
// the wrong type. The store drops, rebuilds or takes over, and goes on.
func TestHostileRedisContent(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "h")
	w, m, l := "h:dl:{k}:w", "h:dl:{k}:m", "h:dl:{k}:l"
	good := entry(1)
	good.Key = "k"
	if err := s.Append(ctx, good, lim); err != nil {
		t.Fatal(err)
	}
	// A stranger's entries before and after ours, and a broken counter.
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"e", "garbage"}})
	other := entry(2) // an entry of another key, in this key's stream
	blob, _ := other.MarshalBinary()
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"e", string(blob)}})
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: w, Values: []any{"x", "no entry field"}})
	rdb.HSet(ctx, m, "bytes", "lots", "f:0-1", "-5")
	rdb.Set(ctx, l, "zombie", 0) // a lease without a TTL: nobody's
	st, err := s.Stats(ctx, "k")
	if err != nil || st.Waiting != 4 || st.Bytes != 0 {
		t.Fatalf("stats with a broken counter: %+v %v", st, err)
	}
	third := entry(3)
	third.Key = "k"
	if err := s.Append(ctx, third, deadletter.Limits{MaxEntries: 100, MaxBytes: 1 << 20}); err != nil {
		t.Fatalf("append with a broken counter: %v", err)
	}
	if b, _ := rdb.HGet(ctx, m, "bytes").Int64(); b <= int64(len(blob)) {
		t.Fatalf("the byte counter was not rebuilt: %d", b)
	}
	lease, err := s.Lease(ctx, "k", "me", time.Minute)
	if err != nil {
		t.Fatalf("a lease without a TTL was not taken over: %v", err)
	}
	defer lease.Release(ctx)
	var ids []string
	dropped := 0
	for range 10 {
		e, ok, err := lease.Next(ctx)
		var ce *deadletter.CorruptError
		if errors.As(err, &ce) {
			dropped++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		ids = append(ids, e.ID)
		_ = lease.Ack(ctx, e)
	}
	if !slices.Equal(ids, []string{"e001", "e003"}) || dropped != 3 {
		t.Fatalf("read %v and dropped %d, want our two entries and 3 dropped", ids, dropped)
	}
	// A key of the wrong type is an error to read, not a panic; the next
	// change drops it (TestRedisAKeyOfTheWrongTypeIsReplaced).
	rdb.Set(ctx, "h:dl:{wrong}:w", "a string", 0)
	if _, err := s.Stats(ctx, "wrong"); err == nil {
		t.Fatal("stats of a string key succeeded")
	}
	e := entry(4)
	e.Key = "wrong"
	if err := s.Append(ctx, e, lim); err != nil {
		t.Fatalf("append onto a string key: %v", err)
	}
	if st, err := s.Stats(ctx, "wrong"); err != nil || st.Waiting != 1 {
		t.Fatalf("stats after the append: %+v, %v", st, err)
	}
	// The key set may hold junk: it is filtered.
	rdb.SAdd(ctx, "h:dl:keys", "bad\x01key")
	if keys, err := s.Keys(ctx); err != nil || !slices.Equal(keys, []string{"k", "wrong"}) {
		t.Fatalf("keys %q %v", keys, err)
	}
}

func TestReleaseDropsIdleConsumers(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	s := open(t, rdb, "c")
	for i := range 3 {
		_ = s.Append(t.Context(), entry(i), lim)
	}
	for _, pod := range []string{"pod-1", "pod-2", "pod-3"} {
		l, err := s.Lease(t.Context(), "pkg.Svc", pod, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		e, _, _ := l.Next(t.Context())
		_ = l.Ack(t.Context(), e)
		_ = l.Release(t.Context())
	}
	cs, err := rdb.XInfoConsumers(t.Context(), "c:dl:{pkg.Svc}:w", "replay").Result()
	if err != nil || len(cs) != 0 {
		t.Fatalf("consumers left: %v %v", cs, err)
	}
}
