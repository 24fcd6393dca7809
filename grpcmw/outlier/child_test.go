package outlier_test

import (
	"testing"

	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/leastrequest" // registers least_request_experimental
	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// Ejection works with grpc-go's other petiole policies, not only
// round_robin; least_request's picker sets its own Done, which the
// balancer's must chain.
func TestOtherChildPolicies(t *testing.T) {
	for _, child := range []string{"least_request_experimental"} {
		t.Run(child, func(t *testing.T) {
			if balancer.Get(child) == nil {
				t.Fatalf("%s is not registered", child)
			}
			h := newHarness(t, 4, only(func(c *outlier.Config) {
				c.ConsecutiveFailures.Disabled = false
				c.ChildPolicy = child
			}), harnessOpts{})
			bad := h.backends[3]
			bad.code.Store(int32(codes.Unavailable))
			h.poll("the bad backend is ejected", 4, func() bool { return h.mon.IsEjected(bad.addr) })
			h.reset()
			if failed := h.call(40); failed != 0 {
				t.Fatalf("%d of 40 calls failed with %s", failed, child)
			}
			if got := bad.calls.Load(); got != 0 {
				t.Fatalf("ejected backend got %d calls with %s (per backend %v)", got, child, h.counts())
			}
		})
	}
}
