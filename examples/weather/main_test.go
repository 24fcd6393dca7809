package main

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A flag out of range is an error that names the flag and its value, given
// before anything starts; never a panic (a -rate above a billion made the
// ticker's interval 0).
func TestRunRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		rate                   int
		length, patience, hang time.Duration
		want                   string
	}{
		{0, time.Second, time.Second, time.Second, "-rate must be in [1, 100000], got 0"},
		{2_000_000_000, time.Second, time.Second, time.Second, "-rate must be in [1, 100000], got 2000000000"},
		{100_001, time.Second, time.Second, time.Second, "-rate must be in [1, 100000], got 100001"},
		{10, 0, time.Second, time.Second, "-phase must be positive, got 0s"},
		{10, time.Second, -time.Second, time.Second, "-patience must be positive, got -1s"},
	} {
		err := run(c.length, c.rate, c.patience, c.hang)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(-phase %v, -rate %d, -patience %v): %v, want an error with %q", c.length, c.rate, c.patience, err, c.want)
		}
	}
}
