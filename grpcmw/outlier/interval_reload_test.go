package outlier_test

import (
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// reloadNet is a churnNet whose pod 0 has just been ejected for a
// consecutive failure (threshold 1), at fake time t; cfg is its config.
func reloadNet(t *testing.T, scheme string, cfg outlier.Config) (*churnNet, *outlier.Monitor) {
	t.Helper()
	mon, err := outlier.NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	cfg.Monitor = mon.Name()
	n := newChurnNet(t, scheme, 3, cfg)
	t.Cleanup(n.close)
	synctest.Wait() // every pod READY
	n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
	client := testgrpc.NewTestServiceClient(n.cc)
	for range 3 {
		_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
	}
	synctest.Wait()
	if !mon.IsEjected(n.addr(0)) {
		t.Fatalf("pod 0 not ejected (ejected %v)", mon.Ejected())
	}
	n.pods[n.addr(0)].code.Store(int32(codes.OK))
	return n, mon
}

// reload gives n's balancer cfg, with every pod, and waits until it is
// applied.
func (c *churnNet) reload(t *testing.T, cfg outlier.Config) {
	t.Helper()
	sc, err := outlier.ServiceConfigJSON(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.state(3)
	st.ServiceConfig = c.r.CC().ParseServiceConfig(sc)
	c.r.UpdateState(st)
	synctest.Wait()
}

// A reload that changes interval keeps the interval in progress, as gRFC
// A50 does: the next sweep comes the new interval after the last one (at
// once if that is past), not the new interval after the reload. Reloads
// that change interval more often than the interval must not put the
// sweeps off for ever: an ejected endpoint would never return.
func TestIntervalReloadsDoNotPutOffTheSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
		cfg.Interval, cfg.BaseEjectionTime, cfg.MaxEjectionTime = 10*time.Second, 10*time.Second, 10*time.Second
		n, mon := reloadNet(t, "intervalflap", cfg)
		cfg.Monitor = mon.Name()
		start := time.Now()
		for i := range 10 { // a reload every 6 s, the interval 11 s, 10 s, 11 s…
			time.Sleep(6 * time.Second)
			cfg.Interval = time.Duration(11-i%2) * time.Second
			n.reload(t, cfg)
		}
		if mon.IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 still ejected %v after its ejection (10 s) began: the reloads put every sweep off", time.Since(start))
		}
	})
}

// A shorter interval applies from the last sweep: one reloaded past the
// new interval's end sweeps at once; a longer one sweeps the new interval
// after the last sweep, not after the reload.
func TestAnIntervalReloadCountsFromTheLastSweep(t *testing.T) {
	t.Run("shorter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
			cfg.Interval, cfg.BaseEjectionTime, cfg.MaxEjectionTime = time.Minute, 5*time.Second, 5*time.Second
			n, mon := reloadNet(t, "intervalshorter", cfg)
			cfg.Monitor = mon.Name()
			time.Sleep(50 * time.Second) // no sweep yet (1 min)
			if !mon.IsEjected(n.addr(0)) {
				t.Fatal("pod 0 returned before the first sweep")
			}
			cfg.Interval = 10 * time.Second // 50 s since the last sweep: due now
			n.reload(t, cfg)
			if mon.IsEjected(n.addr(0)) {
				t.Fatal("pod 0 still ejected after a reload to an interval already over: the sweep waits 10 s more")
			}
		})
	})
	t.Run("longer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
			cfg.Interval, cfg.BaseEjectionTime, cfg.MaxEjectionTime = 10*time.Second, 15*time.Second, 15*time.Second
			n, mon := reloadNet(t, "intervallonger", cfg)
			cfg.Monitor = mon.Name()
			begun := time.Now()
			time.Sleep(9 * time.Second)
			cfg.Interval = 20 * time.Second // the next sweep 20 s after the last one (t0)
			n.reload(t, cfg)
			time.Sleep(10 * time.Second) // 19 s: no sweep since the one at t0
			synctest.Wait()
			if !mon.IsEjected(n.addr(0)) {
				t.Fatalf("pod 0 returned %v after the ejection began, before a sweep was due", time.Since(begun))
			}
			time.Sleep(2 * time.Second) // 21 s: swept at 20 s, the ejection (15 s) over
			synctest.Wait()
			if mon.IsEjected(n.addr(0)) {
				t.Fatalf("pod 0 still ejected %v after the ejection began: the sweep waited 20 s from the reload", time.Since(begun))
			}
		})
	})
}
