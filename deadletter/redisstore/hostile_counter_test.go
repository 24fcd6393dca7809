package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// A byte counter that the streams deny ("inf", 1e300, far above what the
// key's entries can weigh): trusted as it
// stood, it refused every deferral of the key as full for as long as one
// entry waited or was parked (a parked entry waits for an operator: for
// good), and Stats said 0 bytes. The counter is now rebuilt from the
// streams when it is out of their bounds, as a missing one already was.
func TestRedisByteCounterTheStreamsDenyIsRebuilt(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	for i, bad := range []string{"inf", "1e300", "nan", "99999999999999999", "-5"} {
		ns := fmt.Sprint("hc", i)
		s := open(t, rdb, ns)
		e := entry(0)
		if err := s.Append(ctx, e, lim); err != nil {
			t.Fatal(err)
		}
		blob, _ := e.MarshalBinary()
		if err := rdb.HSet(ctx, ns+":dl:{"+e.Key+"}:m", "bytes", bad).Err(); err != nil {
			t.Fatal(err)
		}
		small := deadletter.Limits{MaxEntries: 10, MaxBytes: 1 << 20}
		if err := s.Append(ctx, entry(1), small); err != nil {
			t.Errorf("%d: counter %q: a second entry: %v", i, bad, err)
		}
		b2, _ := entry(1).MarshalBinary()
		if st, err := s.Stats(ctx, e.Key); err != nil || st.Bytes != int64(len(blob)+len(b2)) {
			t.Errorf("%d: counter %q: stats %+v %v, want %d bytes", i, bad, st, err, len(blob)+len(b2))
		}
	}
}

// A stream entry that gives field e twice (a hostile or hand-written
// stream): the reader takes the last one, and the replay is of that
// entry; but the scripts took the first, so that when the replay failed
// into parking, another entry was parked in its place (and the byte
// counter weighed the other one). The scripts now take the last e too.
func TestRedisAnEntryGivenTwiceIsParkedAsItWasReplayed(t *testing.T) {
	srv := redistest.Start(t)
	rdb := client(t, srv)
	ctx := t.Context()
	s := open(t, rdb, "twice")
	first, second := entry(1), entry(2)
	first.Payload = make([]byte, 300)
	b1, _ := first.MarshalBinary()
	b2, _ := second.MarshalBinary()
	if err := s.Append(ctx, entry(0), lim); err != nil { // creates the stream and its group
		t.Fatal(err)
	}
	w := "twice:dl:{" + first.Key + "}:w"
	if err := rdb.Do(ctx, "XADD", w, "*", "e", b1, "e", b2).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(ctx, first.Key, "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	for range 2 { // entry 0, then the one given twice
		e, ok, err := l.Next(ctx)
		if err != nil || !ok {
			t.Fatalf("Next: %v %v", ok, err)
		}
		if _, parked, err := l.Fail(ctx, e, 1); err != nil || !parked {
			t.Fatalf("Fail: %v %v", parked, err)
		}
	}
	parked, err := s.List(ctx, first.Key, deadletter.Parked, "", 10)
	if err != nil || len(parked) != 2 || parked[1].ID != second.ID {
		t.Fatalf("parked %v %v: want %s second, as it was replayed", parked, err, second.ID)
	}
}
