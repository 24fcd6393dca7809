package outlier_test

import (
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// A service config that lowers consecutiveFailures.threshold below an
// endpoint's run of failures ejects it at its next failure: the run is
// counted against the threshold in force, as grpc-go's outlierdetection
// judges the counts it gathered by the config in force at its next
// evaluation (gRFC A50 has no consecutive detector; meshless's evaluates
// at each failure). It was ejected only when its run reached a multiple of
// the new threshold: here, 7 failures, a threshold lowered from 10 to 5,
// ejected at the 10th, not the 8th.
func TestALoweredConsecutiveThresholdEjectsAtTheNextFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mon, err := outlier.NewMonitor()
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 10} })
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "lowered", 3, cfg)
		defer n.close()
		synctest.Wait() // every pod READY
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		client := testgrpc.NewTestServiceClient(n.cc)
		calls := func(k int) {
			for range k {
				_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
			}
			synctest.Wait()
		}
		calls(3 * 7) // round robin: pod 0 fails 7 times in a row
		if got := n.pods[n.addr(0)].calls.Load(); got != 7 {
			t.Fatalf("pod 0 got %d calls, want 7", got)
		}
		if mon.IsEjected(n.addr(0)) {
			t.Fatal("pod 0 ejected after 7 failures, threshold 10")
		}
		cfg.ConsecutiveFailures.Threshold = 5
		n.reload(t, cfg)
		calls(3) // pod 0's 8th failure
		if got := n.pods[n.addr(0)].calls.Load(); got != 8 {
			t.Fatalf("pod 0 got %d calls, want 8", got)
		}
		if !mon.IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 not ejected at its 8th failure in a row, threshold 5 (ejected %v)", mon.Ejected())
		}
	})
}
