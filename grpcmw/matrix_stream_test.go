package grpcmw_test

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// outcomeOf is a call's answer as outcomes counts it: "OK", "CODE" or
// "CODE REASON".
func outcomeOf(err error) string {
	k := status.Code(err).String()
	if r := grpcmw.RejectionReason(err); r != "" {
		k += " " + r
	}
	return k
}

// streams makes n server-streaming calls of one response each, read to
// their end, and counts how they ended (at creation or at a Recv).
func (e *matrixEnv) streams(ctx context.Context, n int) outcomes {
	out := outcomes{}
	for range n {
		s, err := e.client.StreamingOutputCall(ctx, sendParams(1))
		if err == nil {
			_, err = recvAll(s)
		}
		out[outcomeOf(err)]++
	}
	return out
}

// bidis makes n bidirectional calls that send one message and close, read
// to their end.
func (e *matrixEnv) bidis(ctx context.Context, n int) outcomes {
	out := outcomes{}
	for range n {
		s, err := e.client.FullDuplexCall(ctx)
		if err == nil {
			err = s.Send(&testgrpc.StreamingOutputCallRequest{})
			if err == nil || err == io.EOF {
				_ = s.CloseSend()
				for err = nil; err == nil; {
					_, err = s.Recv()
				}
				if err == io.EOF {
					err = nil
				}
			}
		}
		out[outcomeOf(err)]++
	}
	return out
}

// failingStream answers every server-streaming call with code before any
// response.
func failingStream(code codes.Code) func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
	return func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(code, "scripted "+code.String())
	}
}

// failingBidi answers every bidirectional call with code before any
// response.
func failingBidi(f *faultServer, code codes.Code) {
	fn := func(testgrpc.TestService_FullDuplexCallServer) error {
		return status.Error(code, "scripted "+code.String())
	}
	f.bidi.Store(&fn)
}

// The sweep of TestEveryDefaultMeetsEverySetting for streams: each default
// that is on (the breaker, the adaptive throttler, retries until the call
// commits, the retry throttle, the bulkhead, the timeouts) against a
// setting that should change or silence it, checked against what
// grpc-streams.md, hedging.md, grpc.md, deadletter.md and
// configuration.md say happens to a stream.
func TestEveryDefaultMeetsEverySettingForStreams(t *testing.T) {
	const shortRetry = "  retry: { initialBackoff: 1ms, maxBackoff: 1ms }\n"
	tests := []struct {
		name  string
		yaml  string
		setup func(f *faultServer)
		run   func(t *testing.T, e *matrixEnv)
	}{
		{
			// circuitbreaker.md: METRICS_ONLY passes every call; the throttler
			// acts at a stream's creation (admission at creation).
			name:  "METRICS_ONLY breaker × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { mode: METRICS_ONLY, slidingWindowSize: 10, minimumNumberOfCalls: 5 }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 200)
				if got["Unavailable CIRCUIT_OPEN"] != 0 {
					t.Errorf("a METRICS_ONLY breaker refused a stream: %v", got)
				}
				if cb := e.breaker(t); cb.State() != circuitbreaker.StateMetricsOnly || cb.Metrics().FailedCalls == 0 {
					t.Errorf("breaker %v with %d failures, want METRICS_ONLY still recording", cb.State(), cb.Metrics().FailedCalls)
				}
				if got["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("the throttler refused no stream of 200 failing: %v", got)
				}
			},
		},
		{
			name:  "DISABLED breaker × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { mode: DISABLED }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)); failingBidi(f, codes.Unavailable) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.bidis(context.Background(), 100)
				got2 := e.streams(context.Background(), 100)
				if got["Unavailable CIRCUIT_OPEN"]+got2["Unavailable CIRCUIT_OPEN"] != 0 {
					t.Errorf("a DISABLED breaker refused: %v %v", got, got2)
				}
				if m := e.breaker(t).Metrics(); m.FailedCalls != 0 {
					t.Errorf("a DISABLED breaker recorded %d failures", m.FailedCalls)
				}
				if got2["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("the throttler refused no stream beside a DISABLED breaker: %v", got2)
				}
			},
		},
		{
			// A refusal at creation: nothing is sent, no retry, no token moves;
			// the throttler stands aside while the breaker refuses.
			name: "FORCED_OPEN breaker × retry, retry throttle, throttler",
			yaml: "defaults:\n  circuitBreaker: { mode: FORCED_OPEN }\n",
			run: func(t *testing.T, e *matrixEnv) {
				tokens := e.chain.Throttle().Tokens()
				got := e.streams(context.Background(), 25)
				got2 := e.bidis(context.Background(), 25)
				if got["Unavailable CIRCUIT_OPEN"] != 25 || got2["Unavailable CIRCUIT_OPEN"] != 25 {
					t.Errorf("streams = %v, bidis = %v, want 25 CIRCUIT_OPEN each", got, got2)
				}
				if n := e.f.calls.Load(); n != 0 {
					t.Errorf("%d streams reached the server through a FORCED_OPEN breaker", n)
				}
				if after := e.chain.Throttle().Tokens(); after != tokens {
					t.Errorf("retry tokens %v → %v: a refusal moved the bucket", tokens, after)
				}
				if m := e.metrics(); m["meshless.throttler.calls rejected"] != 0 {
					t.Errorf("the throttler counted refusals behind a FORCED_OPEN breaker: %v", m)
				}
			},
		},
		{
			// retry.md's example with streams: 10 tokens, a retry while more
			// than half are left: 3, 2 and 1 attempts.
			name:  "retry until commit × retry throttle",
			yaml:  "defaults:\n" + shortRetry,
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 3)
				if got["Unavailable"] != 3 || e.f.calls.Load() != 3+2+1 {
					t.Errorf("streams = %v with %d attempts, want 3 UNAVAILABLE after 3, 2 and 1 attempts", got, e.f.calls.Load())
				}
			},
		},
		{
			// retry.md: a method whose retries are off still moves the bucket,
			// streams too.
			name:  "retry off × retry throttle",
			yaml:  "defaults:\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 2)
				if got["Unavailable"] != 2 || e.f.calls.Load() != 2 {
					t.Errorf("streams = %v with %d attempts, want 2 UNAVAILABLE, one attempt each", got, e.f.calls.Load())
				}
				if tk := e.chain.Throttle().Tokens(); tk != 8 {
					t.Errorf("tokens = %v, want 8", tk)
				}
			},
		},
		{
			// A failure after the commit is not retried, and is the caller's.
			name: "retry × a failure after the first response",
			yaml: "defaults:\n" + shortRetry,
			setup: func(f *faultServer) {
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
					return status.Error(codes.Unavailable, "after")
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 1)
				if got["Unavailable"] != 1 || e.f.calls.Load() != 1 {
					t.Errorf("streams = %v with %d attempts, want UNAVAILABLE after one attempt", got, e.f.calls.Load())
				}
				if tk := e.chain.Throttle().Tokens(); tk != 9 {
					t.Errorf("tokens = %v, want 9: the committed stream's failure counts", tk)
				}
				if m := e.breaker(t).Metrics(); m.FailedCalls != 1 {
					t.Errorf("breaker failures = %d, want 1", m.FailedCalls)
				}
			},
		},
		{
			// configuration.md, observe mode: nothing acts — a stream is not
			// retried, nor refused; the decisions are counted.
			name:  "observe × throttler, retry, retry throttle",
			yaml:  "defaults:\n  mode: observe\n  circuitBreaker: { enabled: false }\n  adaptiveThrottling: { minimumRequests: 5 }\n" + shortRetry,
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 100)
				if got["Unavailable"] != 100 || e.f.calls.Load() != 100 {
					t.Errorf("streams = %v with %d attempts, want 100 UNAVAILABLE with one attempt each", got, e.f.calls.Load())
				}
				m := e.metrics()
				if m["meshless.observe.decisions throttler reject"] == 0 || m["meshless.observe.decisions retry retry"] == 0 {
					t.Errorf("observe mode counted no would-be throttling or retry: %v", m)
				}
				if tk := e.chain.Throttle().Tokens(); tk >= 10 {
					t.Errorf("retry tokens = %v: the budget must move in observe mode", tk)
				}
			},
		},
		{
			name: "observe × FORCED_OPEN, bulkhead full",
			yaml: "defaults:\n  mode: observe\n  circuitBreaker: { mode: FORCED_OPEN }\n  bulkhead: { maxConcurrentCalls: 1 }\n",
			run: func(t *testing.T, e *matrixEnv) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				held := make(chan struct{})
				e.f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					if e.f.calls.Load() == 1 {
						<-held
					}
					return s.Send(&testgrpc.StreamingOutputCallResponse{})
				})
				s, err := e.client.StreamingOutputCall(ctx, sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if got := e.streams(context.Background(), 3); got["OK"] != 3 {
					t.Errorf("streams = %v, want 3 OK in observe mode", got)
				}
				close(held)
				if _, err := recvAll(s); err != nil {
					t.Errorf("the first stream = %v", err)
				}
				m := e.metrics()
				if m["meshless.observe.decisions circuit_breaker reject"] == 0 || m["meshless.observe.decisions bulkhead reject"] == 0 {
					t.Errorf("observe mode counted no would-be refusal: %v", m)
				}
			},
		},
		{
			// configuration.md: the throttler is keyed like the breaker.
			name:  "keyBy: method × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { keyBy: method, enabled: true, failureRateThreshold: 100, minimumNumberOfCalls: 100 }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.streams(context.Background(), 100); got["ResourceExhausted THROTTLED"] == 0 {
					t.Fatalf("StreamingOutputCall's throttler never engaged: %v", got)
				}
				if got := e.bidis(context.Background(), 50); got["OK"] != 50 {
					t.Errorf("bidis = %v: another method's throttler held them back under keyBy: method", got)
				}
			},
		},
		{
			// ratelimiter.md: each attempt spends a permit; its refusal is
			// never retried, and is the call's error (as a unary call's).
			name:  "rate limiter × retry",
			yaml:  "defaults:\n  rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h }\n" + shortRetry,
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 2)
				if n := e.f.calls.Load(); n != 2 {
					t.Errorf("%d attempts reached the server, want the 2 permits' worth", n)
				}
				if got["ResourceExhausted RATE_LIMITED"] != 2 {
					t.Errorf("streams = %v, want 2 RATE_LIMITED", got)
				}
			},
		},
		{
			// deadletter.md, configuration.md: a stream is never deferred,
			// even when the breaker its own failures opened refuses its retry.
			name:  "dead-letter queue × stream retry, breaker opening mid-call",
			yaml:  "defaults:\n  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n  deadLetter: { path: \"{{dl}}\", on: [CIRCUIT_OPEN, RETRIES_EXHAUSTED] }\n" + shortRetry,
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)); failingBidi(f, codes.Unavailable) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 2)
				got2 := e.bidis(context.Background(), 1)
				if got["Unavailable CIRCUIT_OPEN"] != 2 || got2["Unavailable CIRCUIT_OPEN"] != 1 || e.f.calls.Load() != 2 {
					t.Errorf("streams = %v, bidis = %v after %d attempts, want CIRCUIT_OPEN, never DEFERRED", got, got2, e.f.calls.Load())
				}
			},
		},
		{
			name:  "dead-letter queue on RETRIES_EXHAUSTED × stream",
			yaml:  "defaults:\n  deadLetter: { path: \"{{dl}}\", on: [RETRIES_EXHAUSTED] }\n" + shortRetry,
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.streams(context.Background(), 1); got["Unavailable"] != 1 || e.f.calls.Load() != 3 {
					t.Errorf("streams = %v after %d attempts, want UNAVAILABLE after 3, not DEFERRED", got, e.f.calls.Load())
				}
			},
		},
		{
			// hedging.md: a hedged server stream is not deferred either.
			name:  "dead-letter queue × hedged stream",
			yaml:  "defaults:\n  circuitBreaker: { mode: FORCED_OPEN }\n  retry: { enabled: false }\n  hedging: { hedgingDelay: 10ms }\n  deadLetter: { path: \"{{dl}}\" }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.streams(context.Background(), 1); got["Unavailable CIRCUIT_OPEN"] != 1 || e.f.calls.Load() != 0 {
					t.Errorf("streams = %v after %d copies, want CIRCUIT_OPEN, not DEFERRED", got, e.f.calls.Load())
				}
			},
		},
		{
			// hedging.md: hedges share the retry throttle; no hedge while half
			// the tokens or fewer are left.
			name:  "hedged server stream × retry throttle",
			yaml:  "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\nretryThrottling: { maxTokens: 4, tokenRatio: 0.1 }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 3)
				if got["Unavailable"] != 3 {
					t.Errorf("streams = %v, want 3 UNAVAILABLE", got)
				}
				if n := e.f.calls.Load(); n != 2+1+1 {
					t.Errorf("%d copies reached the server, want 4: 2, then 1 and 1 once the bucket is half empty", n)
				}
			},
		},
		{
			// The bidi call of a hedging method is retried with the hedging
			// section's settings, and shares the throttle as well.
			name:  "hedging method's bidi × retry throttle",
			yaml:  "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\nretryThrottling: { maxTokens: 4, tokenRatio: 0.1 }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)); failingBidi(f, codes.Unavailable) },
			run: func(t *testing.T, e *matrixEnv) {
				// 4 tokens: the first call's attempts take 4 → 3 → 2 (2 is not
				// above 4/2: no third attempt); every later call makes one.
				got := e.bidis(context.Background(), 3)
				if got["Unavailable"] != 3 || e.f.calls.Load() != 2+1+1 {
					t.Errorf("bidis = %v after %d attempts, want 3 UNAVAILABLE after 2, 1 and 1", got, e.f.calls.Load())
				}
			},
		},
		{
			// hedging.md: a copy the rate limiter refuses sends no further
			// copy; the copies in flight go on.
			name: "hedged server stream × rate limiter",
			yaml: "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\n  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n",
			setup: func(f *faultServer) {
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					time.Sleep(50 * time.Millisecond)
					return status.Error(codes.Unavailable, "slow failure")
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				got := e.streams(context.Background(), 1)
				if got["Unavailable"] != 1 || e.f.calls.Load() != 1 {
					t.Errorf("stream = %v after %d copies, want the first copy's UNAVAILABLE", got, e.f.calls.Load())
				}
			},
		},
		{
			// grpc-streams.md: an open stream holds one bulkhead permit for its
			// whole life, and gives it back when it ends.
			name: "bulkhead × a long-lived stream",
			yaml: "defaults:\n  bulkhead: { maxConcurrentCalls: 1 }\n" + shortRetry,
			run: func(t *testing.T, e *matrixEnv) {
				release := make(chan struct{})
				e.f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					if e.f.calls.Load() == 1 {
						_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
						<-release
					}
					return s.Send(&testgrpc.StreamingOutputCallResponse{})
				})
				s, err := e.client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Hour) // the stream lives on
				if got := e.streams(context.Background(), 3); got["ResourceExhausted BULKHEAD_FULL"] != 3 {
					t.Errorf("streams = %v beside an open stream, want 3 BULKHEAD_FULL", got)
				}
				if got := e.calls(context.Background(), 1); got["ResourceExhausted BULKHEAD_FULL"] != 1 {
					t.Errorf("call = %v beside an open stream, want BULKHEAD_FULL", got)
				}
				if tk := e.chain.Throttle().Tokens(); tk != 10 {
					t.Errorf("retry tokens = %v, want 10: a refusal moves none", tk)
				}
				close(release)
				if _, err := recvAll(s); err != nil {
					t.Fatal(err)
				}
				if got := e.streams(context.Background(), 1); got["OK"] != 1 {
					t.Errorf("stream after the long one ended = %v", got)
				}
				if m := e.metrics(); m["meshless.bulkhead.call.active"] != 0 {
					t.Errorf("bulkhead active = %d after every stream ended", m["meshless.bulkhead.call.active"])
				}
			},
		},
		{
			// configuration.md: the timeouts of defaults do not apply to
			// streams: a stream outlives the default 1s perAttempt, and the
			// server sees no deadline from meshless.
			name: "default timeouts × a long-lived stream",
			yaml: "defaults: {}\n",
			setup: func(f *faultServer) {
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					if _, ok := s.Context().Deadline(); ok {
						return status.Error(codes.FailedPrecondition, "the stream has a deadline")
					}
					for range 10 {
						time.Sleep(time.Second)
						if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
							return err
						}
					}
					return nil
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				start := time.Now()
				if got := e.streams(context.Background(), 1); got["OK"] != 1 || time.Since(start) != 10*time.Second {
					t.Errorf("stream = %v after %v, want OK after 10s", got, time.Since(start))
				}
				if m := e.metrics(); m["meshless.timeout.calls attempt timed_out"] != 0 || m["meshless.timeout.calls overall timed_out"] != 0 {
					t.Errorf("a stream counted a meshless timeout: %v", m)
				}
			},
		},
		{
			// grpc-streams.md: a method's own perAttempt bounds each attempt's
			// stream for its whole life; the cut stream ends as a gRPC call
			// whose deadline passed, committed: not retried.
			name: "the method's own perAttempt × a long-lived stream",
			yaml: "services:\n  grpc.testing.TestService:\n    methods:\n      StreamingOutputCall: { timeout: { perAttempt: 2500ms } }\ndefaults:\n" + shortRetry,
			setup: func(f *faultServer) {
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					for range 10 {
						if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
							return err
						}
						select {
						case <-time.After(time.Second):
						case <-s.Context().Done():
							return status.FromContextError(s.Context().Err()).Err()
						}
					}
					return nil
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				start := time.Now()
				s, err := e.client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				// Sent at 0, 1 and 2 s; cut at 2.5 s, an instant the server
				// does not also send at.
				n, err := recvAll(s)
				if status.Code(err) != codes.DeadlineExceeded || n != 3 || time.Since(start) != 2500*time.Millisecond || e.f.calls.Load() != 1 {
					t.Errorf("stream = %d messages and %v after %v and %d attempts, want 3 and DEADLINE_EXCEEDED at 2.5s, one attempt", n, err, time.Since(start), e.f.calls.Load())
				}
				if m := e.metrics(); m["meshless.timeout.calls attempt timed_out"] != 1 {
					t.Errorf("timeouts = %v, want one attempt timed_out", m)
				}
			},
		},
		{
			// timeout.md: the caller's earlier deadline governs; the stream is
			// not the timeout's, and a done context is never retried.
			name: "caller deadline shorter than perAttempt × retry",
			yaml: "services:\n  grpc.testing.TestService:\n    methods:\n      StreamingOutputCall: { timeout: { perAttempt: 1s } }\ndefaults:\n  retry: { initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }\n",
			setup: func(f *faultServer) {
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					<-s.Context().Done()
					return status.FromContextError(s.Context().Err()).Err()
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				got := e.streams(ctx, 1)
				if took := time.Since(start); took != 200*time.Millisecond {
					t.Errorf("the stream took %v, want the caller's 200ms", took)
				}
				if got["DeadlineExceeded"] != 1 || e.f.calls.Load() != 1 {
					t.Errorf("streams = %v with %d attempts, want DEADLINE_EXCEEDED after one attempt", got, e.f.calls.Load())
				}
				if m := e.metrics(); m["meshless.timeout.calls attempt timed_out"] != 0 || m["meshless.timeout.calls overall timed_out"] != 0 {
					t.Errorf("the caller's own deadline counted as a meshless timeout: %v", m)
				}
			},
		},
		{
			// grpc.md, Reload: calls already running finish with the policies
			// they started with; the breaker is the same instance.
			name:  "Reload in a stream's backoff × retry",
			yaml:  "defaults:\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				done := make(chan outcomes, 1)
				go func() { done <- e.streams(context.Background(), 1) }()
				synctest.Wait() // the first attempt failed; the stream waits its backoff
				reload(t, e.chain, "defaults:\n  retry: { enabled: false }\n")
				got := <-done
				if got["Unavailable"] != 1 || e.f.calls.Load() != 3 {
					t.Errorf("stream = %v after %d attempts, want the 3 attempts of the policy it started with", got, e.f.calls.Load())
				}
			},
		},
		{
			name:  "Reload to FORCED_OPEN in a stream's backoff",
			yaml:  "defaults:\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n",
			setup: func(f *faultServer) { f.setStream(failingStream(codes.Unavailable)); failingBidi(f, codes.Unavailable) },
			run: func(t *testing.T, e *matrixEnv) {
				done := make(chan outcomes, 1)
				go func() { done <- e.bidis(context.Background(), 1) }()
				synctest.Wait()
				reload(t, e.chain, "defaults:\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n  circuitBreaker: { mode: FORCED_OPEN }\n")
				got := <-done
				if got["Unavailable CIRCUIT_OPEN"] != 1 {
					t.Errorf("bidi = %v, want its retry refused by the FORCED_OPEN breaker", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				if tt.setup != nil {
					tt.setup(f)
				}
				yaml := strings.ReplaceAll(tt.yaml, "{{dl}}", filepath.Join(t.TempDir(), "dl.db"))
				client, chain, metrics, stop := observed(t, f, yaml)
				defer stop()
				tt.run(t, &matrixEnv{f: f, client: client, chain: chain, metrics: metrics})
			})
		})
	}
}
