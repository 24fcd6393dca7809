package outlier_test

import (
	"strings"
	"testing"

	"github.com/meshless/meshless/grpcmw/outlier"
)

func TestMonitorRegistry(t *testing.T) {
	a, err := outlier.NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	b, err := outlier.NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Name() == b.Name() || a.Name() == "" {
		t.Fatalf("names %q and %q, want two distinct names", a.Name(), b.Name())
	}
	js := `{"monitor":"` + a.Name() + `"}`
	if err := parse(js); err != nil {
		t.Fatalf("config naming an open monitor: %v", err)
	}
	a.Close()
	a.Close() // idempotent
	if err := parse(js); err == nil || !strings.Contains(err.Error(), "no open Monitor named") {
		t.Fatalf("config naming a closed monitor: %v", err)
	}
	if got := a.Ejected(); len(got) != 0 {
		t.Fatalf("Ejected() = %v on a fresh monitor", got)
	}
}

func TestMonitorBound(t *testing.T) {
	var open []*outlier.Monitor
	defer func() {
		for _, m := range open {
			m.Close()
		}
	}()
	for {
		m, err := outlier.NewMonitor()
		if err != nil {
			if err != outlier.ErrTooManyMonitors {
				t.Fatalf("NewMonitor: %v", err)
			}
			break
		}
		open = append(open, m)
		if len(open) > outlier.MaxMonitors {
			t.Fatalf("more than MaxMonitors (%d) open", outlier.MaxMonitors)
		}
	}
	if len(open) == 0 {
		t.Fatal("no monitor could be opened")
	}
}
