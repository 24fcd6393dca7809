package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// One entry in a Redis key's parked stream does not decode (hostile, or
// written by hand), followed by 1000 good parked entries. `requeue KEY -all`
// must requeue all 1000 good ones (or fail). Store.List skips what does not
// decode, so its first page holds 999 entries; the command takes a page
// shorter than MaxList for the end, stops, and says "requeued 999" with
// exit code 0: one parked entry silently left behind. `show` of that entry
// says it does not exist.
func TestRequeueAllGoesPastACorruptParkedEntry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := t.Context()
	p := "adv:dl:{pkg.Svc}:p"
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: p, Values: []any{"e", "garbage", "r", "5"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		blob, err := deadletter.Entry{ID: fmt.Sprintf("p%04d", i), Key: "pkg.Svc", Enqueued: time.Now()}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: p, Values: []any{"e", string(blob), "r", "5"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := cli("-redis", srv.Addr(), "-namespace", "adv", "show", "pkg.Svc", "p0999")
	if code != 0 {
		t.Errorf("show p0999 (a parked entry): exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = cli("-redis", srv.Addr(), "-namespace", "adv", "requeue", "pkg.Svc", "-all")
	left, _ := rdb.XLen(ctx, p).Result()
	if code == 0 && (!strings.Contains(out, "requeued 1000") || left != 1) {
		t.Fatalf("requeue -all: exit 0, %q, yet %d entries left in the parked stream (1 is the garbage one)", strings.TrimSpace(out), left)
	}
	_ = errOut
}
