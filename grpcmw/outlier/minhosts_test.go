package outlier_test

import (
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// The resolver removes endpoints until fewer than minimumHosts are left
// while one is ejected: the rate detectors stop judging (a failing
// endpoint stays in), the cap still holds, and the ejected endpoint
// returns when its time is up; then with one endpoint left, it serves.
func TestBelowMinimumHostsEjectionsStillEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mon, err := outlier.NewMonitor()
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) {
			c.FailurePercentage = outlier.FailurePercentage{Threshold: 50, MinimumHosts: 3, RequestVolume: 4}
		})
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "minhosts", 4, cfg)
		defer n.close()
		synctest.Wait()
		client := testgrpc.NewTestServiceClient(n.cc)
		calls := func(k int) {
			for range k {
				_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
			}
		}
		time.Sleep(time.Second) // a clean interval
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		calls(40)
		time.Sleep(time.Second)
		synctest.Wait()
		if !mon.IsEjected(n.addr(0)) {
			t.Fatalf("pod 0 not ejected (ejected %v)", mon.Ejected())
		}
		ejectedAt := time.Now()
		n.pods[n.addr(0)].code.Store(int32(codes.OK))

		n.r.UpdateState(n.state(4, 0, 1)) // two endpoints: below minimumHosts
		synctest.Wait()
		if !mon.IsEjected(n.addr(0)) {
			t.Fatal("pod 0 returned when the resolver left two endpoints: the cap (1 of 2) allows it out")
		}
		n.pods[n.addr(1)].code.Store(int32(codes.Unavailable))
		for range 5 { // pod 1 fails every call, but two endpoints are below minimumHosts
			calls(10)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if mon.IsEjected(n.addr(1)) {
			t.Fatal("pod 1 ejected with fewer endpoints than minimumHosts")
		}
		n.pods[n.addr(1)].code.Store(int32(codes.OK))
		time.Sleep(10*time.Second - time.Since(ejectedAt) + time.Second) // the ejection (10 s) over, and a sweep
		synctest.Wait()
		if got := mon.Ejected(); len(got) != 0 {
			t.Fatalf("ejected %v %v after the ejection began, want none: its time is up", got, time.Since(ejectedAt))
		}
		// Eject pod 0 again, then leave it alone in the resolver: the last
		// endpoint serves.
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		n.pods[n.addr(1)].code.Store(int32(codes.Unavailable))
		n.r.UpdateState(n.state(4, 0, 1, 2))
		synctest.Wait()
		n.pods[n.addr(2)].code.Store(int32(codes.OK))
		calls(30)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := mon.Ejected(); len(got) != 1 {
			t.Fatalf("ejected %v, want one of pods 0 and 1 (the cap: 1 of 3)", got)
		}
		n.r.UpdateState(n.state(4, 0))
		synctest.Wait()
		if got := mon.Ejected(); len(got) != 0 {
			t.Fatalf("ejected %v with one endpoint left, want none", got)
		}
		n.pods[n.addr(0)].code.Store(int32(codes.OK))
		if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
			t.Fatalf("the only endpoint left does not serve: %v", err)
		}
	})
}
