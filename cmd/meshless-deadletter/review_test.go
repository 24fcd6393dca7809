package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
)

// An entry's Method and Target are any valid UTF-8: control characters
// included. Printed as they are, a hostile entry forges rows of the table
// or drives the operator's terminal (ESC sequences).
func TestHostileMethodAndTargetAreNotPrintedRaw(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e := deadletter.Entry{ID: "h", Key: "k", Method: "/a/B\n0  forged  1970-01-01T00:00:00Z  0  /x/Y\x1b[2J", Target: "t\x1b]0;pwned\a", Enqueued: time.Unix(1, 0)}
	if err := s.Append(t.Context(), e, deadletter.Config{}.Limits()); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, args := range [][]string{{"list", "k", "waiting"}, {"show", "k", "h"}} {
		code, out, stderr := cli(append([]string{"-file", path}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if strings.ContainsAny(out, "\x1b\a") || strings.Contains(out, "\n0  forged") {
			t.Errorf("%v prints the hostile entry raw:\n%q", args, out)
		}
	}
}

// A bad flag or value of list is named in the error, as the global flags'
// are: not only the command's synopsis.
func TestListNamesItsBadFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "k", "-n", "ten"}, `"ten"`},
		{[]string{"list", "k", "-m", "3"}, "-m"},
		{[]string{"list", "k", "parked", "extra"}, `"extra"`},
	} {
		code, _, stderr := cli(append([]string{"-file", path}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %s", tc.args, code, stderr, tc.want)
		}
	}
}

// -file naming another program's bbolt file (a mistyped path): the command
// printed an empty table with exit status 0, and wrote its own bucket into
// that file.
func TestAnotherProgramsFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("sessions")); return err })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli("-file", path, "keys")
	if code != 1 || !strings.Contains(stderr, "not a dead-letter store") {
		t.Fatalf("keys on another program's file: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// -file naming a file that is not a bbolt file at all: the error said
// "boltstore: invalid database", not which file.
func TestAFileThatIsNotBboltIsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli("-file", path, "keys")
	if code != 1 || !strings.Contains(stderr, path) {
		t.Fatalf("keys on a text file: exit %d, stderr %q; want 1 and the path", code, stderr)
	}
}

// -timeout 0 (or negative) ended every command at once with "context
// deadline exceeded" (on Redis), never naming the flag.
func TestANonPositiveTimeoutIsAUsageError(t *testing.T) {
	for _, d := range []string{"0", "-1s"} {
		code, _, stderr := cli("-redis", "127.0.0.1:1", "-timeout", d, "keys")
		if code != 2 || !strings.Contains(stderr, "-timeout") {
			t.Errorf("-timeout %s: exit %d, stderr %q; want 2 and the flag named", d, code, stderr)
		}
	}
}

// -timeout bounds "the whole command" (the usage text), but the bbolt
// store ignores contexts: a requeue or purge of many entries on a slow
// disk (one synced commit each) ran on past it. The command checks the
// deadline between entries, says how many it did, and fails.
func TestPurgeStopsAtTheDeadlineOnAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s, "k")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the deadline has passed
	var out bytes.Buffer
	err = operate(ctx, s, "purge", "k", []string{"p0", "p1"}, &out)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("purge past the deadline: %v, %q", err, out.String())
	}
	if st, _ := s.Stats(t.Context(), "k"); st.Parked != 2 {
		t.Errorf("purge past the deadline removed %d parked entries", 2-st.Parked)
	}
}

// An empty file (touched, or a log file given by mistake) is no dead-letter
// store: the command turned it into a bbolt file and printed an empty table.
func TestAnEmptyFileIsAnErrorAndStaysEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli("-file", path, "keys")
	if code != 1 || !strings.Contains(stderr, path) {
		t.Errorf("keys on an empty file: exit %d, stderr %q; want 1 and the path", code, stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("keys on an empty file wrote into it: %v", err)
	}
}

// No error shows a Redis password (docs/configuration.md): a -redis URL the
// command could not parse was echoed whole, password included, to stderr
// (and so to the CI job's or the shell's log).
func TestARedisPasswordIsNeverShown(t *testing.T) {
	code, _, stderr := cli("-redis", "redis://ops:s3cret@127.0.0.1:1/abc", "keys")
	if code != 1 || strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, "abc") {
		t.Fatalf("exit %d, stderr %q; want 1, the bad value and no password", code, stderr)
	}
}

// A text payload longer than show prints is cut at 4 KiB: cut inside a
// character, the text was no longer valid UTF-8 and show printed it as a
// hex dump.
func TestShowCutsALongTextPayloadBetweenCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e := deadletter.Entry{ID: "t", Key: "k", Payload: []byte(`{"p":"` + strings.Repeat("€", 2000) + `"}`), Enqueued: time.Unix(1, 0)}
	if err := s.Append(t.Context(), e, deadletter.Config{}.Limits()); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	code, out, stderr := cli("-file", path, "show", "k", "t")
	if code != 0 || !strings.Contains(out, `"{\"p\":\"€€€`) || strings.Contains(out, "00000000  ") {
		t.Fatalf("show: exit %d, %s\n%s", code, stderr, out)
	}
}

// `--all` is how Go's own flags accept -all: it was taken for an ID
// ("not found") and nothing was done.
func TestDoubleDashAllIsAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, "k")
	_ = s.Close()
	code, out, stderr := cli("-file", path, "purge", "k", "--all")
	if code != 0 || out != "purged 2\n" {
		t.Errorf("purge k --all: exit %d, %q, %q; want both parked entries purged", code, out, stderr)
	}
}
