package yamlscan_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/yamlscan"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func clip(s string) string { return s }

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		stop       int
		want       yamlscan.Result
	}{
		{"a tab in the indentation", "defaults:\n\tretry: {}\n", 0,
			yamlscan.Result{Problem: &yamlscan.Problem{Path: "defaults.retry", Line: 2, Message: "indentation uses a tab; YAML needs spaces"}}},
		{"a key that lines up with none above", "defaults:\n    retry:\n      maxAttempts: 3\n  timeout: {}\n", 0,
			yamlscan.Result{Problem: &yamlscan.Problem{Path: "defaults.timeout", Line: 4,
				Message: `"timeout" is indented 2 spaces, which lines up with no key above it (they are indented 0, 4, 6); mind the indentation`}}},
		{"the path of a line", "services:\n  pkg.Svc:\n    retry:\n      maxAttempts: 0\n", 4,
			yamlscan.Result{Path: "services.pkg.Svc.retry.maxAttempts"}},
		{"a well-indented document", "defaults:\n  retry: { maxAttempts: 3 }\n", 0, yamlscan.Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := yamlscan.Scan([]byte(tc.yaml), tc.stop, join, clip)
			if got.Path != tc.want.Path || (got.Problem == nil) != (tc.want.Problem == nil) ||
				got.Problem != nil && *got.Problem != *tc.want.Problem {
				t.Fatalf("Scan = %+v (problem %+v), want %+v (problem %+v)", got, got.Problem, tc.want, tc.want.Problem)
			}
		})
	}
}
