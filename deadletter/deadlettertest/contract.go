package deadlettertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
)

// T0 is the time the contract's entries are enqueued at.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestStore checks that the stores open returns keep the [deadletter.Store]
// contract: order per key, atomic bounds, leases, failed replays and
// parking, requeue and purge, figures, listing, and refusal after Close.
// open returns a new, empty store each time; TestStore closes it.
func TestStore(t *testing.T, open func(t *testing.T) deadletter.Store) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s deadletter.Store)
	}{
		{"OrderPerKey", testOrder},
		{"RoundTrip", testRoundTrip},
		{"MaxEntries", testMaxEntries},
		{"MaxBytes", testMaxBytes},
		{"MaxBytesIsInclusive", testMaxBytesExact},
		{"ConcurrentAppendsKeepTheBound", testConcurrentBound},
		{"LeaseIsExclusive", testLeaseExclusive},
		{"NextWithoutAckKeepsTheHead", testNextKeepsHead},
		{"FailThenPark", testFailPark},
		{"ExpireRemoves", testExpire},
		{"RequeueAndPurge", testRequeuePurge},
		{"StatsAndKeys", testStats},
		{"ListPages", testList},
		{"Closed", testClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tc.run(t, s)
		})
	}
}

var lim = deadletter.Limits{MaxEntries: 1000, MaxBytes: 1 << 20}

func entry(key string, i int) deadletter.Entry {
	return deadletter.Entry{
		ID: fmt.Sprintf("id-%s-%03d", key, i), Key: key, Method: "/pkg.Svc/M",
		Payload: []byte(fmt.Sprintf("payload %d", i)), Enqueued: T0.Add(time.Duration(i) * time.Second),
	}
}

func mustAppend(t *testing.T, s deadletter.Store, es ...deadletter.Entry) {
	t.Helper()
	for _, e := range es {
		if err := s.Append(t.Context(), e, lim); err != nil {
			t.Fatalf("Append(%s): %v", e.ID, err)
		}
	}
}

func mustLease(t *testing.T, s deadletter.Store, key, owner string) deadletter.Lease {
	t.Helper()
	l, err := s.Lease(t.Context(), key, owner, time.Minute)
	if err != nil {
		t.Fatalf("Lease(%s, %s): %v", key, owner, err)
	}
	return l
}

func next(t *testing.T, l deadletter.Lease) (deadletter.Entry, bool) {
	t.Helper()
	e, ok, err := l.Next(t.Context())
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return e, ok
}

// drain acks every waiting entry of key and returns their IDs in order.
func drain(t *testing.T, s deadletter.Store, key string) []string {
	t.Helper()
	l := mustLease(t, s, key, "drain")
	defer l.Release(context.WithoutCancel(t.Context()))
	var ids []string
	for {
		e, ok := next(t, l)
		if !ok {
			return ids
		}
		ids = append(ids, e.ID)
		if err := l.Ack(t.Context(), e); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

func ids(key string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, entry(key, i).ID)
	}
	return out
}

func testOrder(t *testing.T, s deadletter.Store) {
	for i := range 5 {
		mustAppend(t, s, entry("a", i), entry("b", i))
	}
	if got, want := drain(t, s, "a"), ids("a", 0, 5); !slices.Equal(got, want) {
		t.Fatalf("key a replayed %v, want %v", got, want)
	}
	if got, want := drain(t, s, "b"), ids("b", 0, 5); !slices.Equal(got, want) {
		t.Fatalf("key b replayed %v, want %v", got, want)
	}
}

func testRoundTrip(t *testing.T, s deadletter.Store) {
	in := entry("a", 1)
	in.Target = "dns:///backend:443"
	in.Metadata = map[string][]string{"x-request-id": {"r1", "r2"}}
	in.Payload = []byte{0, 1, 2, 0xff}
	mustAppend(t, s, in)
	l := mustLease(t, s, "a", "o")
	defer l.Release(context.WithoutCancel(t.Context()))
	got, ok := next(t, l)
	if !ok {
		t.Fatal("no entry")
	}
	if got.Pos == "" {
		t.Error("Pos is empty")
	}
	if got.ID != in.ID || got.Key != in.Key || got.Method != in.Method || got.Target != in.Target ||
		!slices.Equal(got.Payload, in.Payload) || !got.Enqueued.Equal(in.Enqueued) || got.Replays != 0 ||
		!maps.EqualFunc(got.Metadata, in.Metadata, slices.Equal) {
		t.Fatalf("read back %+v, want %+v", got, in)
	}
}

func testMaxEntries(t *testing.T, s deadletter.Store) {
	small := deadletter.Limits{MaxEntries: 3, MaxBytes: 1 << 20}
	for i := range 3 {
		if err := s.Append(t.Context(), entry("a", i), small); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(t.Context(), entry("a", 3), small); !errors.Is(err, deadletter.ErrFull) {
		t.Fatalf("the 4th entry of 3: %v, want ErrFull", err)
	}
	if err := s.Append(t.Context(), entry("b", 0), small); err != nil {
		t.Fatalf("another key is not full: %v", err)
	}
	// A parked entry still counts.
	l := mustLease(t, s, "a", "o")
	e, _ := next(t, l)
	if _, parked, err := l.Fail(t.Context(), e, 1); err != nil || !parked {
		t.Fatalf("Fail: parked %v, %v", parked, err)
	}
	_ = l.Release(t.Context())
	if err := s.Append(t.Context(), entry("a", 4), small); !errors.Is(err, deadletter.ErrFull) {
		t.Fatalf("with a parked entry counted: %v, want ErrFull", err)
	}
	if got := drain(t, s, "a"); !slices.Equal(got, ids("a", 1, 3)) {
		t.Fatalf("kept %v, want the first 3 minus the parked one", got)
	}
}

func testMaxBytes(t *testing.T, s deadletter.Store) {
	e := entry("a", 0)
	blob, _ := e.MarshalBinary()
	size := int64(len(blob))
	lim := deadletter.Limits{MaxEntries: 100, MaxBytes: 2*size + size/2}
	for i := range 2 {
		if err := s.Append(t.Context(), entry("a", i), lim); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(t.Context(), entry("a", 2), lim); !errors.Is(err, deadletter.ErrFull) {
		t.Fatalf("past MaxBytes: %v, want ErrFull", err)
	}
	st, err := s.Stats(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if st.Waiting != 2 || st.Bytes != 2*size {
		t.Fatalf("stats %+v, want 2 waiting, %d bytes", st, 2*size)
	}
	drain(t, s, "a")
	if st, _ := s.Stats(t.Context(), "a"); st.Bytes != 0 {
		t.Fatalf("bytes after acking all: %d", st.Bytes)
	}
}

// testMaxBytesExact: entries that fill MaxBytes to the byte are kept; one
// byte more is refused, and so is an entry larger than MaxBytes alone.
func testMaxBytesExact(t *testing.T, s deadletter.Store) {
	blob, _ := entry("a", 0).MarshalBinary()
	size := int64(len(blob))
	exact := deadletter.Limits{MaxEntries: 100, MaxBytes: 2 * size}
	for i := range 2 {
		if err := s.Append(t.Context(), entry("a", i), exact); err != nil {
			t.Fatalf("entry %d of 2 filling MaxBytes exactly: %v", i, err)
		}
	}
	if err := s.Append(t.Context(), entry("a", 2), exact); !errors.Is(err, deadletter.ErrFull) {
		t.Fatalf("past MaxBytes by a whole entry: %v, want ErrFull", err)
	}
	tiny := deadletter.Limits{MaxEntries: 100, MaxBytes: size - 1}
	if err := s.Append(t.Context(), entry("b", 0), tiny); !errors.Is(err, deadletter.ErrFull) {
		t.Fatalf("an entry a byte over MaxBytes on an empty key: %v, want ErrFull", err)
	}
	if st, _ := s.Stats(t.Context(), "b"); st.Waiting != 0 || st.Bytes != 0 {
		t.Fatalf("the refused entry left %+v", st)
	}
}

func testConcurrentBound(t *testing.T, s deadletter.Store) {
	small := deadletter.Limits{MaxEntries: 10, MaxBytes: 1 << 20}
	var wg sync.WaitGroup
	var mu sync.Mutex
	kept := 0
	for i := range 30 {
		wg.Go(func() {
			err := s.Append(t.Context(), entry("a", i), small)
			if err != nil && !errors.Is(err, deadletter.ErrFull) {
				t.Errorf("Append: %v", err)
			}
			if err == nil {
				mu.Lock()
				kept++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st, err := s.Stats(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if kept != 10 || st.Waiting != 10 {
		t.Fatalf("30 concurrent appends under a bound of 10: %d accepted, %d kept", kept, st.Waiting)
	}
}

func testLeaseExclusive(t *testing.T, s deadletter.Store) {
	mustAppend(t, s, entry("a", 0))
	l := mustLease(t, s, "a", "one")
	if _, err := s.Lease(t.Context(), "a", "two", time.Minute); !errors.Is(err, deadletter.ErrLeased) {
		t.Fatalf("a second holder: %v, want ErrLeased", err)
	}
	l2 := mustLease(t, s, "b", "two") // other keys are free
	_ = l2.Release(t.Context())
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l3 := mustLease(t, s, "a", "two")
	if e, ok := next(t, l3); !ok || e.ID != entry("a", 0).ID {
		t.Fatalf("after release, the next holder reads %v %v", e.ID, ok)
	}
	_ = l3.Release(t.Context())
}

func testNextKeepsHead(t *testing.T, s deadletter.Store) {
	mustAppend(t, s, entry("a", 0), entry("a", 1))
	l := mustLease(t, s, "a", "one")
	e1, _ := next(t, l)
	e2, _ := next(t, l)
	if e1.ID != e2.ID || e1.Pos != e2.Pos {
		t.Fatalf("Next twice without Ack: %s then %s", e1.ID, e2.ID)
	}
	_ = l.Release(t.Context()) // as a holder that stopped on a rejection
	l = mustLease(t, s, "a", "two")
	defer l.Release(context.WithoutCancel(t.Context()))
	if e, _ := next(t, l); e.ID != e1.ID {
		t.Fatalf("the next holder starts at %s, want %s", e.ID, e1.ID)
	}
}

func testFailPark(t *testing.T, s deadletter.Store) {
	mustAppend(t, s, entry("a", 0), entry("a", 1))
	l := mustLease(t, s, "a", "o")
	defer l.Release(context.WithoutCancel(t.Context()))
	for want := 1; want <= 3; want++ {
		e, _ := next(t, l)
		if e.ID != entry("a", 0).ID || e.Replays != want-1 {
			t.Fatalf("attempt %d: head %s with %d replays", want, e.ID, e.Replays)
		}
		n, parked, err := l.Fail(t.Context(), e, 3)
		if err != nil || n != want || parked != (want == 3) {
			t.Fatalf("Fail %d: n=%d parked=%v err=%v", want, n, parked, err)
		}
	}
	if e, _ := next(t, l); e.ID != entry("a", 1).ID {
		t.Fatalf("after parking, the head is %s", e.ID)
	}
	parked, err := s.List(t.Context(), "a", deadletter.Parked, "", 10)
	if err != nil || len(parked) != 1 || parked[0].ID != entry("a", 0).ID || parked[0].Replays != 3 {
		t.Fatalf("parked: %+v, %v", parked, err)
	}
	if st, _ := s.Stats(t.Context(), "a"); st.Waiting != 1 || st.Parked != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testExpire(t *testing.T, s deadletter.Store) {
	mustAppend(t, s, entry("a", 0), entry("a", 1))
	l := mustLease(t, s, "a", "o")
	e, _ := next(t, l)
	if err := l.Expire(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	_ = l.Release(t.Context())
	if got := drain(t, s, "a"); !slices.Equal(got, ids("a", 1, 2)) {
		t.Fatalf("after expiring the head: %v", got)
	}
}

func testRequeuePurge(t *testing.T, s deadletter.Store) {
	mustAppend(t, s, entry("a", 0), entry("a", 1), entry("a", 2))
	l := mustLease(t, s, "a", "o")
	for range 2 { // park the first two
		e, _ := next(t, l)
		if _, parked, err := l.Fail(t.Context(), e, 1); err != nil || !parked {
			t.Fatalf("Fail: %v %v", parked, err)
		}
	}
	_ = l.Release(t.Context())
	now := T0.Add(time.Hour)
	if err := s.Requeue(t.Context(), "a", entry("a", 0).ID, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Requeue(t.Context(), "a", "nope", now); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("requeue of an unknown ID: %v", err)
	}
	if err := s.Purge(t.Context(), "a", entry("a", 0).ID); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("purge of an entry no longer parked: %v", err)
	}
	if err := s.Purge(t.Context(), "a", entry("a", 1).ID); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Stats(t.Context(), "a")
	if st.Parked != 0 || st.Waiting != 2 {
		t.Fatalf("stats %+v, want 2 waiting and none parked", st)
	}
	waiting, err := s.List(t.Context(), "a", deadletter.Waiting, "", 10)
	if err != nil || len(waiting) != 2 {
		t.Fatalf("waiting %v %v", waiting, err)
	}
	if r := waiting[1]; r.ID != entry("a", 0).ID || r.Replays != 0 || !r.Enqueued.Equal(now) {
		t.Fatalf("requeued entry %+v: want it last, 0 replays, enqueued at %v", r, now)
	}
	blob, _ := entry("a", 0).MarshalBinary()
	if st.Bytes != 2*int64(len(blob)) {
		t.Fatalf("bytes %d after a purge, want %d", st.Bytes, 2*len(blob))
	}
}

func testStats(t *testing.T, s deadletter.Store) {
	if st, err := s.Stats(t.Context(), "nothing"); err != nil || st != (deadletter.Stats{}) {
		t.Fatalf("an unknown key: %+v %v", st, err)
	}
	mustAppend(t, s, entry("b", 3), entry("b", 4), entry("a", 0))
	st, err := s.Stats(t.Context(), "b")
	if err != nil || st.Waiting != 2 || !st.Oldest.Equal(entry("b", 3).Enqueued) {
		t.Fatalf("stats %+v %v", st, err)
	}
	keys, err := s.Keys(t.Context())
	if err != nil || !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("keys %v %v", keys, err)
	}
}

func testList(t *testing.T, s deadletter.Store) {
	for i := range 7 {
		mustAppend(t, s, entry("a", i))
	}
	var got []string
	after := ""
	for range 10 {
		page, err := s.List(t.Context(), "a", deadletter.Waiting, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("a page of %d, asked 3", len(page))
		}
		for _, e := range page {
			got = append(got, e.ID)
		}
		after = page[len(page)-1].Pos
	}
	if !slices.Equal(got, ids("a", 0, 7)) {
		t.Fatalf("listed %v", got)
	}
}

func testClosed(t *testing.T, s deadletter.Store) {
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), entry("a", 0), lim); !errors.Is(err, deadletter.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := s.Lease(t.Context(), "a", "o", time.Minute); !errors.Is(err, deadletter.ErrClosed) {
		t.Fatalf("Lease after Close: %v", err)
	}
}
