package examples_test

import (
	"context"
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
	args []string
	want []string
}{
	"basic":   {nil, []string{`Check(""): SERVING`, `Check("no.such.Service"): error NotFound`, "breaker: CLOSED"}},
	"server":  {[]string{"-limit", "2", "-extra", "2", "-pushback", "250ms"}, []string{"reason BULKHEAD_FULL, grpc-retry-pushback-ms: [250]", "attempts that reached the server: 1", "a new call: OK"}},
	"weather": {[]string{"-phase", "300ms", "-rate", "40", "-patience", "1s"}, []string{"the API is failing", "recovered  meshless", "goroutines"}},
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
