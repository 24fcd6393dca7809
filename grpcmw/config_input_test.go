package grpcmw_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

// problems returns the lines of err, failing when there is none.
func problems(t *testing.T, doc string) []string {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(doc))
	if err == nil {
		t.Fatalf("ParseConfig accepted\n%s\nas %+v", doc, cfg)
	}
	return strings.Split(strings.TrimPrefix(err.Error(), "grpcmw: config: "), "\n")
}

func TestIssue9AliasBombIsRefused(t *testing.T) {
	// A billion laughs: 1000 services × 1000 methods × 1000 codes, from 30 kB.
	var b strings.Builder
	b.WriteString("defaults:\n  retry:\n    retryableStatusCodes: &codes [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("UNAVAILABLE")
	}
	b.WriteString("]\nservices:\n  a.S0: &svc\n    methods: &methods\n      M0: &method { retry: { retryableStatusCodes: *codes } }\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "      M%d: *method\n", i)
	}
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "  a.S%d: *svc\n", i)
	}
	start := time.Now()
	lines := problems(t, b.String())
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("ParseConfig took %v", took)
	}
	want := fmt.Sprintf("the document holds more than %d keys and values", config.MaxConfigValues)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `services."a.S0".methods.M`) || !strings.Contains(lines[0], want) {
		t.Fatalf("error:\n%s\nwant one line naming where the limit of %d was reached", strings.Join(lines, "\n"), config.MaxConfigValues)
	}
}

func TestIssue9ErrorOutputIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("defaults:\n  retry:\n")
	for i := range 30 {
		fmt.Fprintf(&b, "    bogus%d: 1\n", i)
	}
	lines := problems(t, b.String())
	if len(lines) != config.MaxConfigProblems+1 || lines[len(lines)-1] != "and 10 more problems" {
		t.Fatalf("%d lines, the last %q; want %d and \"and 10 more problems\"", len(lines), lines[len(lines)-1], config.MaxConfigProblems+1)
	}

	long := strings.Repeat("x", 400<<10)
	for name, doc := range map[string]string{
		"key":     "services:\n  a.B:\n    methods:\n      ? " + long + "\n      : { retry: { bogus: 1 } }\n",
		"value":   "defaults: { retry: { jitter: " + long + " } }",
		"keyBy":   "defaults: { circuitBreaker: { keyBy: " + long + " } }",
		"service": "services:\n  ? " + long + "/x\n  : {}\n",
	} {
		t.Run(name, func(t *testing.T) {
			lines := problems(t, doc)
			if len(lines) != 1 || len(lines[0]) > 400 || !strings.Contains(lines[0], strings.Repeat("x", 64)+"…") {
				t.Fatalf("error of %d lines, the first %d bytes long: %.500s", len(lines), len(lines[0]), lines[0])
			}
		})
	}
}

func TestIssue9SizeIsLimited(t *testing.T) {
	big := []byte("# " + strings.Repeat("x", config.MaxConfigSize-3) + "\n")
	if _, err := grpcmw.ParseConfig(big[:config.MaxConfigSize]); err != nil {
		t.Fatalf("a document of exactly the limit: %v", err)
	}
	big = append(big, '\n')
	_, err := grpcmw.ParseConfig(big)
	want := "grpcmw: config: (root): the document is 1048577 bytes; the limit is 1048576 bytes (1 MiB)"
	if err == nil || err.Error() != want {
		t.Fatalf("ParseConfig = %v, want %s", err, want)
	}

	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = grpcmw.LoadConfig(path)
	want = path + ": grpcmw: config: (root): the document is 3145728 bytes; the limit is 1048576 bytes (1 MiB)"
	if err == nil || err.Error() != want {
		t.Fatalf("LoadConfig = %v, want %s", err, want)
	}
	// An endless file: LoadConfig stops reading at the limit.
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err = grpcmw.LoadConfig("/dev/zero")
		if err == nil || !strings.Contains(err.Error(), "the document is more than 1048576 bytes") {
			t.Fatalf("LoadConfig(/dev/zero) = %v", err)
		}
	}
}

func TestIssue9TabIndentationIsNamed(t *testing.T) {
	for doc, want := range map[string]string{
		"defaults:\n\tretry: {}\n":                         "defaults.retry: indentation uses a tab; YAML needs spaces (line 2)",
		"defaults:\n  retry:\n\t  maxAttempts: 2\n":        "defaults.retry.maxAttempts: indentation uses a tab; YAML needs spaces (line 3)",
		"defaults:\n  retry: { maxAttempts: 2 }\n\tx: 1\n": "defaults.x: indentation uses a tab; YAML needs spaces (line 3)",
	} {
		if lines := problems(t, doc); len(lines) != 1 || lines[0] != want {
			t.Errorf("%q:\n%s\nwant:\n%s", doc, strings.Join(lines, "\n"), want)
		}
	}
}

func TestIssue9MisindentedKeyHasItsLine(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{name: "between two levels", yaml: "defaults:\n  retry:\n    maxAttempts: 2\n   jitter: 0.1\n",
			want: `defaults.retry.jitter: "jitter" is indented 3 spaces, which lines up with no key above it (they are indented 0, 2, 4); mind the indentation (line 4)`},
		{name: "a method", yaml: "services:\n  a.B:\n    methods:\n      Get:\n        retry: { maxAttempts: 2 }\n     Put: {}\n",
			want: `services."a.B".methods.Put: "Put" is indented 5 spaces, which lines up with no key above it (they are indented 0, 2, 4, 6, 8); mind the indentation (line 6)`},
		{name: "after a list", yaml: "defaults:\n  retry:\n    retryableStatusCodes:\n      - UNAVAILABLE\n      - ABORTED\n   maxAttempts: 2\n",
			want: `defaults.retry.maxAttempts: "maxAttempts" is indented 3 spaces, which lines up with no key above it (they are indented 0, 2, 4, 6); mind the indentation (line 6)`},
		{name: "too deep", yaml: "defaults:\n  retry:\n    maxAttempts: 2\n      jitter: 0.1\n",
			want: `(root): not valid YAML: mapping values are not allowed in this context (line 4)`},
		{name: "at the top level", yaml: "defaults:\n  retry: {}\nservices:\n  a.B: {}\n services: {}\n",
			want: `services.services: "services" is indented 1 spaces, which lines up with no key above it (they are indented 0, 2); mind the indentation (line 5)`},
		{name: "a sibling one level out", yaml: "defaults:\n  retry:\n    maxAttempts: 2\n  jitter: 0.1\n",
			want: `defaults.jitter: unknown key (known here: adaptiveThrottling, bulkhead, circuitBreaker, deadLetter, hedging, mode, rateLimiter, retry, timeout) (line 4)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if lines := problems(t, tt.yaml); len(lines) != 1 || lines[0] != tt.want {
				t.Fatalf("error:\n%s\nwant:\n%s", strings.Join(lines, "\n"), tt.want)
			}
		})
	}
}

func TestIssue9OneMistakeOneMessage(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{name: "a word for a number", yaml: "defaults: { retry: { maxAttempts: three } }",
			want: []string{`defaults.retry.maxAttempts: want an integer, got "three" (line 1)`}},
		{name: "an unknown code", yaml: "defaults: { retry: { retryableStatusCodes: [UNAVAILABL] } }",
			want: []string{`defaults.retry.retryableStatusCodes[0]: unknown status code "UNAVAILABL" (a gRPC code name such as UNAVAILABLE, or a number 0-16) (line 1)`}},
		{name: "a key another is checked against", yaml: "defaults: { circuitBreaker: { slidingWindowSize: ten, minimumNumberOfCalls: 200 } }",
			want: []string{`defaults.circuitBreaker.slidingWindowSize: want an integer, got "ten" (line 1)`}},
		{name: "inherited by a service", yaml: "defaults: { retry: { initialBackoff: soon } }\nservices: { a.B: { retry: { maxBackoff: 50ms } } }",
			want: []string{`defaults.retry.initialBackoff: want a duration such as 100ms or 2s, got "soon" (line 1)`}},
		{name: "other mistakes still count", yaml: "defaults: { retry: { maxAttempts: three, jitter: 2 } }",
			want: []string{`defaults.retry.maxAttempts: want an integer, got "three" (line 1)`, `defaults.retry.jitter: must be in [0, 1), got 2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if lines := problems(t, tt.yaml); strings.Join(lines, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("error:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestIssue9DocumentMustBeAMapping(t *testing.T) {
	for doc, want := range map[string]string{
		"- a\n":                 "(root): the document must be a mapping (defaults, services, …), got a list (line 1)",
		"hello":                 `(root): the document must be a mapping (defaults, services, …), got "hello" (line 1)`,
		"defaults: {}\n---\n{}": "(root): a second document starts here (after ---); a configuration is one document (line 2)",
	} {
		if lines := problems(t, doc); len(lines) != 1 || lines[0] != want {
			t.Errorf("%q:\n%s\nwant:\n%s", doc, strings.Join(lines, "\n"), want)
		}
	}
}

func TestIssue9ChoicesInAnyCase(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`
services:
  a.B:
    circuitBreaker: { keyBy: Method, slidingWindowType: time_based, slidingWindowSize: 60, mode: Metrics_Only }
    methods:
      Get: { circuitBreaker: { failureRateThreshold: 10 } }
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"keyBy: method", "slidingWindowType: TIME_BASED", "mode: METRICS_ONLY"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Marshal wrote\n%s\nwithout %q", out, want)
		}
	}
	if _, err := grpcmw.New(cfg); err != nil {
		t.Fatalf("New: %v", err)
	}
}
