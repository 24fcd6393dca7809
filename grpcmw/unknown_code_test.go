package grpcmw_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
)

// A status code gRPC does not define (a server may send any number as
// grpc-status, and grpc-go passes it on as it came) is UNKNOWN to the
// breaker and the retry, as grpc-java and gRPC C-core read it and as the
// outlier balancer counts it: UNKNOWN is a failure on the defaults, so such
// answers open the breaker; a retry that lists UNKNOWN retries them. The
// caller still gets the code the server sent.
func TestACodeGRPCDoesNotDefineCountsAsUnknown(t *testing.T) {
	for _, code := range []codes.Code{17, 99, 1 << 30} {
		t.Run(code.String(), func(t *testing.T) {
			f := new(faultServer)
			f.setUnary(failing(code))
			addr, _ := serve(t, f)
			client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }
  retry: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNKNOWN] }
`)
			for i := range 2 {
				_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
				if status.Code(err) != code {
					t.Fatalf("call %d got %v, want the server's code %d unchanged", i, err, code)
				}
			}
			if n := f.calls.Load(); n != 4 {
				t.Fatalf("the server saw %d attempts for 2 calls, want 4: code %d is UNKNOWN, which the retry lists", n, code)
			}
			if cb, _ := chain.Breaker(testService); cb.State() != circuitbreaker.StateOpen {
				t.Fatalf("the breaker is %v after 4 answers of code %d, want OPEN: UNKNOWN is a failure", cb.State(), code)
			}
		})
	}
}
