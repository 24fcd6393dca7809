package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/redistest"
)

// A Redis key whose data holds a value of another type (left by hand or by
// another tool) cannot be read until the next deferral replaces it. `keys`
// stopped at it with that key's error and printed no row at all: the
// operator saw none of the other keys. Now every other key's row is
// printed, the unreadable key's row names its error, and the exit code
// says something could not be read.
func TestKeysGoesPastAKeyItCannotRead(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := t.Context()
	for _, key := range []string{"pkg.A", "pkg.B", "pkg.C"} {
		blob, err := deadletter.Entry{ID: "w0", Key: key, Enqueued: time.Now()}.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "adv:dl:{" + key + "}:w", Values: []any{"e", string(blob)}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.SAdd(ctx, "adv:dl:keys", key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Del(ctx, "adv:dl:{pkg.B}:w").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "adv:dl:{pkg.B}:w", "not ours", 0).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli("-redis", srv.Addr(), "-namespace", "adv", "keys")
	if code != 1 {
		t.Errorf("keys with an unreadable key: exit %d, want 1", code)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = line
		}
	}
	for _, key := range []string{"pkg.A", "pkg.C"} {
		if f := strings.Fields(rows[key]); len(f) < 2 || f[1] != "1" {
			t.Errorf("the row of %s is %q, want 1 waiting\noutput:\n%s", key, rows[key], out)
		}
	}
	if !strings.Contains(rows["pkg.B"], "WRONGTYPE") {
		t.Errorf("the row of pkg.B is %q, want its error\noutput:\n%s", rows["pkg.B"], out)
	}
	if !strings.Contains(errOut, "1 of 3 keys") {
		t.Errorf("stderr %q, want it to say 1 of 3 keys could not be read", errOut)
	}
}
