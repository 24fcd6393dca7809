package examples_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runs says how each program under examples/ is run by TestEveryExampleRuns
// — short flags — and a line of its output that shows it ran to its end.
// chaos has its own tests (examples/chaos), which run it in fake time.
var runs = map[string]struct {
	args  []string
	want  []string
	check func(out string) error // more than lines: nil, or what is wrong
}{
	"basic":   {nil, []string{`Check(""): SERVING`, `Check("no.such.Service"): error NotFound`, "breaker: CLOSED"}, nil},
	"server":  {[]string{"-limit", "2", "-extra", "2", "-pushback", "250ms"}, []string{"reason BULKHEAD_FULL, grpc-retry-pushback-ms: [250]", "attempts that reached the server: 1", "a new call: OK"}, nil},
	"weather": {[]string{"-phase", "300ms", "-rate", "40", "-patience", "1s"}, []string{"the API is failing", "recovered  meshless", "goroutines"}, healthyPhaseIsItsOwn},
}

// healthyPhaseIsItsOwn checks weather's report: each user of the bare
// service makes one API request, so the bare service's users of the
// healthy phase made as many API requests in it. A user counted in a phase
// whose request the API served in the next one (sent as the phase ended)
// shows there as a give-up or a failure that did not happen.
func healthyPhaseIsItsOwn(out string) error {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 10 && f[0] == "healthy" && f[1] == "bare" {
			if f[2] != f[9] {
				return fmt.Errorf("healthy bare: %s users, %s API requests in the phase: %q", f[2], f[9], line)
			}
			return nil
		}
	}
	return errors.New("no healthy bare row in the report")
}

// TestEveryExampleRuns builds every program under examples/ but chaos and
// runs it to completion with short flags: exit status 0 and the lines of
// runs in its output. A new program without an entry in runs fails the test.
func TestEveryExampleRuns(t *testing.T) {
	var programs []string
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && d.Name() != "chaos" && isMain(t, d.Name()) {
			programs = append(programs, d.Name())
		}
	}
	for _, p := range programs {
		if _, ok := runs[p]; !ok {
			t.Errorf("examples/%s is a program without an entry in runs (run_test.go): give it short flags and the output that shows it finished", p)
		}
	}
	for name := range runs {
		if !contains(programs, name) {
			t.Errorf("runs names %s, which is not a program under examples/", name)
		}
	}
	if t.Failed() {
		return
	}

	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, "./"+p)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range programs {
		t.Run(p, func(t *testing.T) {
			r := runs[p]
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(bin, p), r.args...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", p, strings.Join(r.args, " "), err, out)
			}
			for _, w := range r.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output of %s lacks %q:\n%s", p, w, out)
				}
			}
			if r.check != nil {
				if err := r.check(string(out)); err != nil {
					t.Errorf("%s: %v\n%s", p, err, out)
				}
			}
		})
	}
}

// isMain reports whether dir holds a main package.
func isMain(t *testing.T, dir string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\npackage main\n") || strings.HasPrefix(string(b), "package main\n") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
