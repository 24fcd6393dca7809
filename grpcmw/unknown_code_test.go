package grpcmw_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
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

// A code gRPC does not define is error.type _OTHER on the call's event, one
// value whatever number the server sent, so that an observer labelling by
// ErrorType (resilience.Event: "for metrics") cannot be given a new value
// per number. Before, it was CODE_<n>: up to 2^31 values from the wire.
func TestACodeGRPCDoesNotDefineIsOneErrorType(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, "defaults: { retry: { enabled: false }, circuitBreaker: { enabled: false } }\n", grpcmw.WithObserver(obs))
	sent := []codes.Code{17, 99, 1 << 30, 1<<31 - 1} // grpc-go reads grpc-status as an int32
	for _, code := range sent {
		f.setUnary(failing(code))
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); status.Code(err) != code {
			t.Fatalf("got %v, want the server's code %d unchanged", err, code)
		}
	}
	var types []string
	for _, r := range obs.Recorded() {
		if r.Source.Kind == resilience.KindCall {
			types = append(types, r.Event.ErrorType)
		}
	}
	if want := []string{"_OTHER", "_OTHER", "_OTHER", "_OTHER"}; !slices.Equal(types, want) {
		t.Fatalf("error types %q for codes %v, want %q", types, sent, want)
	}
}
