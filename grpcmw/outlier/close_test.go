package outlier_test

import (
	"slices"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A channel closed while it has an endpoint ejected: its balancer tells
// the Monitor, which may serve other channels and outlive this one, that
// the endpoint returned, and leaves no interval timer behind. Otherwise the
// Monitor (and a metrics listener) would keep the address ejected for ever.
func TestAClosedChannelReturnsItsEjections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := resiliencetest.NewClock(t0)
		l := new(events)
		mon, err := outlier.NewMonitor(outlier.WithClock(clk), outlier.WithListener(l))
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "closed", 3, cfg)
		defer n.close()
		synctest.Wait()
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 3 {
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		synctest.Wait()
		if !mon.IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 not ejected (ejected %v)", mon.Ejected())
		}
		if err := n.cc.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := mon.Ejected(); len(got) != 0 {
			t.Errorf("after the channel closed, the Monitor has %v ejected", got)
		}
		want := []string{"ejected " + n.addr(0) + " " + outlier.ReasonConsecutiveFailures, "returned " + n.addr(0)}
		if got := l.list(); !slices.Equal(got, want) {
			t.Errorf("the listener heard %v, want %v", got, want)
		}
		if p := clk.Pending(); p != 0 {
			t.Errorf("%d timers left on the clock after the channel closed", p)
		}
	})
}
