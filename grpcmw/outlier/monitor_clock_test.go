package outlier_test

import (
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A config that names another Monitor moves the balancer to that Monitor's
// clock at once: its sweeps, and so its returns, follow the new clock, and
// an ejection keeps the time it has served. Before, the sweep in progress
// stayed on the old Monitor's clock: advancing the new one returned nothing
// (with the old clock stopped, an ejected endpoint stayed out for ever), and
// the ejection's start, read from the old clock, was compared with the new
// clock's time.
func TestAnotherMonitorsClockDrivesTheSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, next := resiliencetest.NewClock(t0), resiliencetest.NewClock(t0.Add(time.Hour))
		var mons []*outlier.Monitor
		for _, c := range []*resiliencetest.Clock{old, next} {
			m, err := outlier.NewMonitor(outlier.WithClock(c))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			mons = append(mons, m)
		}
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
		cfg.Monitor = mons[0].Name() // interval 1 s, ejections 10 s
		n := newChurnNet(t, "clockmoved", 3, cfg)
		defer n.close()
		synctest.Wait()
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 3 {
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		synctest.Wait()
		n.pods[n.addr(0)].code.Store(int32(codes.OK))
		old.Advance(4 * time.Second) // 4 s of the ejection served
		if !mons[0].IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 not ejected (ejected %v)", mons[0].Ejected())
		}
		cfg.Monitor = mons[1].Name()
		n.reload(t, cfg)
		next.Advance(5 * time.Second) // 9 s served
		if !mons[1].IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 returned after 9 s of its 10 s ejection (the new Monitor has %v ejected)", mons[1].Ejected())
		}
		next.Advance(2 * time.Second) // 11 s served: swept at 10 s
		if mons[1].IsEjected(n.addr(0)) {
			t.Fatal("pod 0 still ejected 11 s into its 10 s ejection: the new Monitor's clock drives no sweep")
		}
	})
}
