package redisstore_test

import (
	"fmt"
	"testing"

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
