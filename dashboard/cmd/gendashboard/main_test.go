package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/dashboard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run writes exactly what dashboard.JSON returns.
func TestRunWritesTheDashboard(t *testing.T) {
	out := filepath.Join(t.TempDir(), "meshless.json")
	if err := run(out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := dashboard.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("run wrote %d bytes that differ from dashboard.JSON's %d", len(got), len(want))
	}
}

func TestRunReportsAnUnwritableFile(t *testing.T) {
	if err := run(filepath.Join(t.TempDir(), "no-such-dir", "meshless.json")); err == nil {
		t.Error("run into a missing directory returned no error")
	}
}
