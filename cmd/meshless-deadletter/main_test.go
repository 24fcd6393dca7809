package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cli(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// fill puts 4 entries under key: 2 waiting, 2 parked (p0, p1).
func fill(t *testing.T, s deadletter.Store, key string) {
	t.Helper()
	ctx := context.Background()
	lim := deadletter.Config{}.Limits()
	for i, id := range []string{"p0", "p1", "w0", "w1"} {
		e := deadletter.Entry{ID: id, Key: key, Method: "/pkg.Svc/M", Payload: []byte("payload " + id),
			Metadata: map[string][]string{"x-request-id": {"r-" + id}}, Enqueued: time.Unix(int64(1000+i), 0)}
		if err := s.Append(ctx, e, lim); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Lease(ctx, key, "fill", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for range 2 {
		e, _, _ := l.Next(ctx)
		if _, parked, err := l.Fail(ctx, e, 1); err != nil || !parked {
			t.Fatalf("park: %v %v", parked, err)
		}
	}
}

func TestHelpSaysWhatItDoes(t *testing.T) {
	code, out, _ := cli("-h")
	if code != 0 || !strings.Contains(out, "lists, inspects, requeues and purges") || !strings.Contains(out, "requeue KEY") {
		t.Fatalf("-h: %d %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "no store", args: []string{"keys"}, code: 2, want: "give one store"},
		{name: "two stores", args: []string{"-file", file, "-redis", "x:1", "keys"}, code: 2, want: "give one store"},
		{name: "no command", args: []string{"-file", file}, code: 2, want: "no command"},
		{name: "unknown command", args: []string{"-file", file, "frobnicate"}, code: 2, want: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"-nope"}, code: 2, want: "flag provided but not defined"},
		{name: "show without id", args: []string{"-file", file, "show", "k"}, code: 2, want: "show KEY ID"},
		{name: "bad state", args: []string{"-file", file, "list", "k", "dead"}, code: 2, want: `"dead" is not waiting or parked`},
		{name: "bad n", args: []string{"-file", file, "list", "k", "-n", "0"}, code: 2, want: "-n must be in [1, 1000]"},
		{name: "-all with ids", args: []string{"-file", file, "purge", "k", "a", "-all"}, code: 2, want: "purge KEY"},
		{name: "a file that is not there", args: []string{"-file", file + ".missing", "keys"}, code: 1, want: "no such file"},
		{name: "an unknown id", args: []string{"-file", file, "show", "k", "nope"}, code: 1, want: "entry not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// A -redis URL whose password has a reserved character that is not
// percent-encoded is invalid; the error says so without showing the
// password, or the part of it the URL parser took for a port.
func TestAnInvalidRedisURLDoesNotShowItsPassword(t *testing.T) {
	for _, url := range []string{"redis://u:s/3cr3t@h:1/0", "redis://:s3#cr3t@h:1", "redis://u:s3?cr3t@h:1"} {
		code, _, stderr := cli("-redis", url, "keys")
		if code != 1 || !strings.Contains(stderr, "-redis") || !strings.Contains(stderr, "percent-encode") {
			t.Errorf("-redis %s: exit %d, stderr %q; want 1 and the flag named, with what to do", url, code, stderr)
		}
		for _, part := range []string{"s/3", "s3#", "s3?", "cr3t", ":s\"", ":s3\"", "user:xxxxx@]"} {
			if strings.Contains(stderr, part) {
				t.Errorf("-redis %s: stderr %q shows %q of the password", url, stderr, part)
			}
		}
	}
	code, _, stderr := cli("-redis", "redis://h:0", "keys")
	if code != 1 || !strings.Contains(stderr, "port") {
		t.Errorf("-redis redis://h:0: exit %d, stderr %q; want 1 and the port named", code, stderr)
	}
}

// The same session on either store: keys, list, show, requeue, purge.
func TestOperatorSession(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) (deadletter.Store, []string)
	}{
		{name: "bbolt file", store: func(t *testing.T) (deadletter.Store, []string) {
			path := filepath.Join(t.TempDir(), "dl.db")
			s, err := boltstore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s, []string{"-file", path}
		}},
		{name: "redis", store: func(t *testing.T) (deadletter.Store, []string) {
			srv := redistest.Start(t)
			s, rdb := redisStore(t, srv.Addr(), "ops")
			t.Cleanup(func() { _ = s.Close(); _ = rdb.Close() })
			return s, []string{"-redis", "redis://" + srv.Addr() + "/0", "-namespace", "ops"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, flags := tc.store(t)
			fill(t, s, "pkg.Svc")
			if tc.name == "bbolt file" {
				_ = s.Close() // the service is stopped: the command may open the file
			}
			step := func(want int, args ...string) string {
				t.Helper()
				code, out, stderr := cli(append(append([]string{}, flags...), args...)...)
				if code != want {
					t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
				}
				return out
			}
			if out := step(0, "keys"); !strings.Contains(out, "pkg.Svc  2        2") || !strings.Contains(out, "1970-01-01T00:16:42Z") {
				t.Fatalf("keys:\n%s", out)
			}
			out := step(0, "list", "pkg.Svc")
			if !strings.Contains(out, "p0") || !strings.Contains(out, "p1") || strings.Contains(out, "w0") {
				t.Fatalf("list (parked):\n%s", out)
			}
			if out := step(0, "list", "pkg.Svc", "waiting", "-n", "1"); !strings.Contains(out, "w0") || strings.Contains(out, "w1") {
				t.Fatalf("list waiting -n 1:\n%s", out)
			}
			if out := step(0, "show", "pkg.Svc", "p1"); !strings.Contains(out, "state:          parked") ||
				!strings.Contains(out, `x-request-id: "r-p1"`) || !strings.Contains(out, `"payload p1"`) || !strings.Contains(out, "failed replays: 1") {
				t.Fatalf("show:\n%s", out)
			}
			if out := step(0, "requeue", "pkg.Svc", "p0"); out != "requeued 1\n" {
				t.Fatalf("requeue: %q", out)
			}
			if out := step(0, "purge", "pkg.Svc", "-all"); out != "purged 1\n" {
				t.Fatalf("purge -all: %q", out)
			}
			step(1, "purge", "pkg.Svc", "p1") // gone already
			out = step(0, "keys")
			if !strings.Contains(out, "pkg.Svc  3        0") {
				t.Fatalf("keys after requeue and purge:\n%s", out)
			}
			if out := step(0, "list", "pkg.Svc", "waiting"); !strings.Contains(out, "p0") {
				t.Fatalf("the requeued entry is not waiting:\n%s", out)
			}
		})
	}
}

// A file held by a running service (here: this process, through another
// path to the same file) is a clear error, not a wait.
func TestALockedFileIsAClearError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Link(path, filepath.Join(dir, "other.db")); err != nil {
		t.Skip("no hard links here:", err)
	}
	code, _, stderr := cli("-file", filepath.Join(dir, "other.db"), "keys")
	if code != 1 || !strings.Contains(stderr, "locked by another process") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func redisStore(t *testing.T, addr, ns string) (*redisstore.Store, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	s, err := redisstore.New(rdb, redisstore.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	return s, rdb
}
