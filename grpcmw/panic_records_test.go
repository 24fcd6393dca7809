package grpcmw_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// panicStreamConfig retries (so that a stream keeps what it sent) under an
// overall timeout an hour long, a stream's own.
const panicStreamConfig = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall: { timeout: { overall: 1h } }
`

// panickingStreams returns a client whose streams go through the chain
// and then an interceptor that panics while boom is set, noting the
// context it was given in seen.
func panickingStreams(t *testing.T, obs resilience.Observer) (testgrpc.TestServiceClient, *atomic.Bool, *atomic.Pointer[context.Context], *faultServer) {
	t.Helper()
	f := new(faultServer)
	addr, _ := serve(t, f)
	cfg, err := grpcmw.ParseConfig([]byte(panicStreamConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	boom := new(atomic.Bool)
	seen := new(atomic.Pointer[context.Context])
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		seen.Store(&ctx)
		if boom.Load() {
			panic("inner stream interceptor")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(chain.StreamClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn), boom, seen, f
}

// A stream whose opening panics (an interceptor inside meshless's, the
// codec) ends its contexts on the panic's way up: they were left to the
// caller's context, and to the overall deadline's timer, an hour away.
func TestAStreamThatPanicsOpeningEndsItsContexts(t *testing.T) {
	client, boom, seen, _ := panickingStreams(t, nil)
	boom.Store(true)
	ctx, cancel := context.WithCancel(t.Context()) // a caller's context that outlives the call
	defer cancel()
	if r := recovered(func() { _, _ = client.StreamingOutputCall(ctx, sendParams(1)) }); r != "inner stream interceptor" {
		t.Fatalf("recovered %v, want the interceptor's panic unchanged", r)
	}
	if err := (*seen.Load()).Err(); err == nil {
		t.Fatal("the panicking stream's attempt context is still live")
	}
}

// A stream whose opening panics is a call that failed, as a unary call
// that panics is: recorded once (meshless.call.duration, a failure), over
// for its retry policy (meshless.retry.calls, failed_*) and counted by its
// overall timeout (completed) — when its first attempt panics, and when a
// retry RecvMsg makes panics. It was recorded by none of them.
func TestAStreamThatPanicsOpeningIsRecordedAsAFailedCall(t *testing.T) {
	for _, path := range []string{"first attempt", "retry in RecvMsg"} {
		t.Run(path, func(t *testing.T) {
			obs := new(resiliencetest.Observer)
			client, boom, _, f := panickingStreams(t, obs)
			f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
				boom.Store(true) // the retry's opening panics
				return status.Error(codes.Unavailable, "down")
			})
			if path == "first attempt" {
				boom.Store(true)
			}
			obs.Reset()
			r := recovered(func() {
				s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
				if err != nil {
					t.Errorf("the stream's first attempt failed to open: %v", err)
					return
				}
				_, _ = recvAll(s)
			})
			if r != "inner stream interceptor" {
				t.Fatalf("recovered %v, want the interceptor's panic unchanged", r)
			}
			var calls, retries, overall int
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
				case rec.Source.Kind == resilience.KindTimeout && rec.Source.Scope == "overall":
					overall++
					if ev.TimedOut {
						t.Error("the overall timeout counted the panic timed out")
					}
				}
			}
			if calls != 1 || retries != 1 || overall != 1 {
				t.Errorf("%d call events, %d retry ends, %d overall timeout events; want 1 each\n%s",
					calls, retries, overall, strings.Join(obs.Trace(), "\n"))
			}
		})
	}
}
