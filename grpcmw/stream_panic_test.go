package grpcmw_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// panicOpenConfig retries (so that the stream keeps what it sends, before
// it commits) and has a breaker, a bulkhead and the adaptive throttler.
const panicOpenConfig = `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 10ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
  bulkhead: { maxConcurrentCalls: 3 }
retryThrottling: { enabled: false }
`

// panicky is an interceptor below meshless's whose streams panic in the
// method named boom, once they are open.
func panicky(boom string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &panickyStream{ClientStream: cs, boom: boom}, nil
	}
}

type panickyStream struct {
	grpc.ClientStream
	boom string
}

func (s *panickyStream) explode(name string) {
	if s.boom == name {
		panic("inner " + name)
	}
}

func (s *panickyStream) SendMsg(m any) error { s.explode("SendMsg"); return s.ClientStream.SendMsg(m) }
func (s *panickyStream) RecvMsg(m any) error { s.explode("RecvMsg"); return s.ClientStream.RecvMsg(m) }
func (s *panickyStream) CloseSend() error    { s.explode("CloseSend"); return s.ClientStream.CloseSend() }
func (s *panickyStream) Header() (metadata.MD, error) {
	s.explode("Header")
	return s.ClientStream.Header()
}

// A panic in an open stream's inner SendMsg, RecvMsg, Header or CloseSend
// (an interceptor inside meshless's, a codec) goes on up unchanged, and
// on its way the stream ends as a call that panics does (metrics.md, "A
// call that panics"): its bulkhead permit is back, the breaker counts one
// failure, the call is recorded once, failed, and the retry policy's call
// is over, failed. A later Recv answers with an error (it is not retried
// onto another attempt). (The stream stayed open: its permits were held until its context
// ended or the garbage collector found it, and its end was recorded as
// the caller's cancellation, not as a failure.)
func TestAPanicInAnOpenStreamEndsItAsAFailedCall(t *testing.T) {
	for _, boom := range []string{"SendMsg", "RecvMsg", "Header", "CloseSend"} {
		t.Run(boom, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				h := &hdrServer{ok: 1}
				client, chain, stop := inBubbleOf(t, h, panicOpenConfig,
					[]grpcmw.Option{grpcmw.WithObserver(obs)},
					[]grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainStreamInterceptor(panicky(boom))})
				defer stop()
				ctx, cancel := context.WithCancel(context.Background()) // outlives the stream
				defer cancel()
				st, err := client.FullDuplexCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				obs.Reset()
				r := recovered(func() {
					switch boom {
					case "SendMsg":
						_ = st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload("a")})
					case "RecvMsg":
						_, _ = st.Recv()
					case "Header":
						_, _ = st.Header()
					case "CloseSend":
						_ = st.CloseSend()
					}
				})
				if r != "inner "+boom {
					t.Fatalf("recovered %v, want the inner stream's panic unchanged", r)
				}
				bh, _ := chain.Bulkhead(testService)
				cb, _ := chain.Breaker(testService)
				if bh.Active() != 0 || cb.Metrics().FailedCalls != 1 {
					t.Errorf("after the panic: %d bulkhead permits out, %d failures in the breaker; want 0 and 1", bh.Active(), cb.Metrics().FailedCalls)
				}
				if boom != "RecvMsg" {
					var err error
					if r := recovered(func() { _, err = st.Recv() }); r != nil {
						t.Errorf("Recv after the panic panicked: %v (the stream was retried onto the panicking inner stream)", r)
					} else if err == nil {
						t.Error("Recv after the panic returned a response, want an error")
					}
				}
				var calls, retries int
				for _, rec := range obs.Recorded() {
					switch ev := rec.Event; {
					case rec.Source.Kind == resilience.KindCall && ev.Type == resilience.EventCall:
						calls++
						if ev.Outcome != resilience.Failure || ev.ErrorType != "UNKNOWN" {
							t.Errorf("the call's event: outcome %v, error type %q; want failure, UNKNOWN (metrics.md)", ev.Outcome, ev.ErrorType)
						}
					case rec.Source.Kind == resilience.KindRetry && ev.Type == resilience.EventRetryDone:
						retries++
						if ev.Outcome != resilience.Failure {
							t.Errorf("the retry's end: outcome %v, want failure", ev.Outcome)
						}
					}
				}
				if calls != 1 || retries != 1 {
					t.Errorf("%d call events, %d retry ends; want 1 each\n%s", calls, retries, strings.Join(obs.Trace(), "\n"))
				}
			})
		})
	}
}

// The same when the inner stream panics while a RecvMsg in another
// goroutine waits out a retry's backoff (CloseSend answers at once, on the
// attempt that failed): the stream is not retried, and when the RecvMsg
// wakes it ends the call, once, failed, and returns INTERNAL.
func TestAPanicDuringAStreamsBackoffEndsItAsAFailedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		h := &hdrServer{ok: 2}
		failed := make(chan struct{}, 1)
		client, chain, stop := inBubbleOf(t, h, panicOpenConfig,
			[]grpcmw.Option{grpcmw.WithObserver(obs)},
			[]grpc.DialOption{grpc.WithDisableRetry(), grpc.WithChainStreamInterceptor(noteRecvFailure(failed), panicky("CloseSend"))})
		defer stop()
		ctx, cancel := context.WithCancel(context.Background()) // outlives the stream
		defer cancel()
		st, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obs.Reset()
		recvd := make(chan error, 1)
		go func() { _, err := st.Recv(); recvd <- err }()
		<-failed        // attempt 1's failure reached meshless
		synctest.Wait() // and RecvMsg waits out the backoff
		if r := recovered(func() { _ = st.CloseSend() }); r != "inner CloseSend" {
			t.Fatalf("recovered %v, want the inner stream's panic unchanged", r)
		}
		if err := <-recvd; status.Code(err) != codes.Internal {
			t.Errorf("the waiting Recv = %v, want INTERNAL", err)
		}
		bh, _ := chain.Bulkhead(testService)
		if bh.Active() != 0 || h.n.Load() != 1 {
			t.Errorf("%d bulkhead permits out after %d attempts; want 0 after 1", bh.Active(), h.n.Load())
		}
		var calls, retries int
		for _, rec := range obs.Recorded() {
			switch ev := rec.Event; {
			case rec.Source.Kind == resilience.KindCall && ev.Type == resilience.EventCall:
				calls++
				if ev.Outcome != resilience.Failure || ev.ErrorType != "UNKNOWN" {
					t.Errorf("the call's event: outcome %v, error type %q; want failure, UNKNOWN (metrics.md)", ev.Outcome, ev.ErrorType)
				}
			case rec.Source.Kind == resilience.KindRetry && ev.Type == resilience.EventRetryDone:
				retries++
			}
		}
		if calls != 1 || retries != 1 {
			t.Errorf("%d call events, %d retry ends; want 1 each\n%s", calls, retries, strings.Join(obs.Trace(), "\n"))
		}
	})
}
