package grpcmw_test

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Observe mode changes nothing about a call: one whose caller's context had
// ended before it began still goes to the interceptors below meshless (a
// logging or metrics interceptor) and to gRPC, which answers it with the
// context's status, as it would without meshless. It went nowhere: meshless
// answered it itself (engine.Method.Ended), so an inner interceptor missed
// it. As under enforce, it counts neither for nor against the backend: the
// breaker and the retry budget do not move.
func TestObserveModePassesACallWhoseContextEndedBeforeItBegan(t *testing.T) {
	for _, tc := range []struct{ name, config string }{
		{"retrying", `
defaults:
  mode: observe
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
  retry: { maxAttempts: 3, retryableStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED] }
  timeout: { perAttempt: 1s, overall: 3s }
`},
		{"hedged", `
defaults:
  mode: observe
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
  retry: { enabled: false }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var unaries, streams atomic.Int32
				inner := []grpc.DialOption{
					grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
						unaries.Add(1)
						return invoker(ctx, method, req, reply, cc, opts...)
					}),
					grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
						streams.Add(1)
						return streamer(ctx, desc, cc, method, opts...)
					}),
				}
				f := new(faultServer)
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					return nil
				})
				obs := new(resiliencetest.Observer)
				client, chain, stop := inBubbleOf(t, f, tc.config, []grpcmw.Option{grpcmw.WithObserver(obs)}, inner)
				defer stop()
				tokens := chain.Throttle().Tokens()
				const rounds = 6
				for i := range rounds {
					for _, e := range []struct {
						ctx  func() (context.Context, context.CancelFunc)
						code codes.Code
					}{
						{func() (context.Context, context.CancelFunc) {
							return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
						}, codes.DeadlineExceeded},
						{func() (context.Context, context.CancelFunc) {
							ctx, cancel := context.WithCancel(context.Background())
							cancel()
							return ctx, cancel
						}, codes.Canceled},
					} {
						ctx, cancel := e.ctx()
						if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); status.Code(err) != e.code {
							t.Fatalf("unary call %d: %v, want %v from the context", i, err, e.code)
						}
						st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
						if err == nil {
							err = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
						}
						if status.Code(err) != e.code {
							t.Fatalf("server stream %d: %v, want %v from the context", i, err, e.code)
						}
						bidi, err := client.FullDuplexCall(ctx)
						if err == nil {
							_, err = bidi.Recv()
						}
						if status.Code(err) != e.code {
							t.Fatalf("bidi stream %d: %v, want %v from the context", i, err, e.code)
						}
						cancel()
					}
				}
				synctest.Wait()
				if got, want := unaries.Load(), int32(2*rounds); got != want {
					t.Errorf("the inner unary interceptor saw %d calls, want %d (every one, as without meshless)", got, want)
				}
				if got, want := streams.Load(), int32(4*rounds); got != want {
					t.Errorf("the inner stream interceptor saw %d streams, want %d (every one, as without meshless)", got, want)
				}
				// Recorded as under enforce: one call each, with the
				// context's status, as meshless would have answered it.
				byType := map[string]int{}
				for _, rec := range obs.Recorded() {
					if rec.Source.Kind == resilience.KindCall && rec.Event.Type == resilience.EventCall {
						byType[rec.Event.ErrorType]++
					}
				}
				if want := map[string]int{"DEADLINE_EXCEEDED": 3 * rounds, "CANCELLED": 3 * rounds}; !maps.Equal(byType, want) {
					t.Errorf("calls recorded by error type: %v, want %v", byType, want)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 0 || cb.State().String() != "CLOSED" {
					t.Errorf("breaker %v with %d calls counted, want CLOSED and none", cb.State(), m.Calls)
				}
				if got := chain.Throttle().Tokens(); got != tokens {
					t.Errorf("retry tokens %v → %v, want no move", tokens, got)
				}
			})
		})
	}
}
