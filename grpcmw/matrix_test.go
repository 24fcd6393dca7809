package grpcmw_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// matrixEnv is one row's client, chain, server and metrics.
type matrixEnv struct {
	f       *faultServer
	client  testgrpc.TestServiceClient
	chain   *grpcmw.Chain
	metrics func() map[string]int64
}

// outcomes counts a run of calls' answers by "CODE" or "CODE REASON".
type outcomes map[string]int

func (e *matrixEnv) calls(ctx context.Context, n int) outcomes {
	out := outcomes{}
	for range n {
		_, err := e.client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		k := status.Code(err).String()
		if r := grpcmw.RejectionReason(err); r != "" {
			k += " " + r
		}
		out[k]++
	}
	return out
}

func (e *matrixEnv) breaker(t *testing.T) *circuitbreaker.Breaker {
	t.Helper()
	cb, ok := e.chain.Breaker(testService)
	if !ok {
		t.Fatal("no breaker for the service")
	}
	return cb
}

// relayedBulkheadFull is what a meshless server that sheds (grpcmw.NewServer)
// answers: RESOURCE_EXHAUSTED with the ErrorInfo reason BULKHEAD_FULL.
func relayedBulkheadFull(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	st, err := status.New(codes.ResourceExhausted, `bulkhead "grpc.testing.TestService" is full (limit 1)`).
		WithDetails(&errdetails.ErrorInfo{Reason: grpcmw.ReasonBulkheadFull, Domain: grpcmw.ErrorDomain})
	if err != nil {
		panic(err)
	}
	return nil, st.Err()
}

// A default that is on meets every other setting: each row is a feature
// on by default (the adaptive throttler, retries on UNAVAILABLE, the retry
// throttle, the timeouts, the breaker) against a setting that should change
// or silence it, and checks what docs/configuration.md, grpc.md, retry.md,
// hedging.md and overload.md say happens: what the callers get, how many
// attempts reach the server, the breaker and the metrics.
func TestEveryDefaultMeetsEverySetting(t *testing.T) {
	const shortRetry = "  retry: { initialBackoff: 1ms, maxBackoff: 1ms }\n"
	tests := []struct {
		name  string
		yaml  string
		setup func(f *faultServer)
		run   func(t *testing.T, e *matrixEnv)
	}{
		{
			// circuitbreaker.md: METRICS_ONLY "pass"; configuration.md: "calls
			// pass, the window and events still run". The breaker never refuses;
			// the throttler is its own policy and acts (overload.md: it stands
			// aside only while the breaker is open or half-open).
			name:  "METRICS_ONLY breaker × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { mode: METRICS_ONLY, slidingWindowSize: 10, minimumNumberOfCalls: 5 }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 200)
				if got["Unavailable CIRCUIT_OPEN"] != 0 {
					t.Errorf("a METRICS_ONLY breaker refused: %v", got)
				}
				if cb := e.breaker(t); cb.State() != circuitbreaker.StateMetricsOnly || cb.Metrics().FailedCalls == 0 {
					t.Errorf("breaker %v with %d failures, want METRICS_ONLY still recording", cb.State(), cb.Metrics().FailedCalls)
				}
				if got["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("the throttler rejected nothing in 200 failing calls beside a METRICS_ONLY breaker: %v", got)
				}
			},
		},
		{
			name:  "DISABLED breaker × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { mode: DISABLED }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 200)
				if got["Unavailable CIRCUIT_OPEN"] != 0 {
					t.Errorf("a DISABLED breaker refused: %v", got)
				}
				if m := e.breaker(t).Metrics(); m.FailedCalls != 0 {
					t.Errorf("a DISABLED breaker recorded %d failures", m.FailedCalls)
				}
				if got["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("the throttler rejected nothing beside a DISABLED breaker: %v", got)
				}
			},
		},
		{
			// A rejection is never retried and moves no token (retry.md rule 1);
			// the throttler stands aside while the breaker refuses.
			name: "FORCED_OPEN breaker × retry, retry throttle, throttler",
			yaml: "defaults:\n  circuitBreaker: { mode: FORCED_OPEN }\n",
			run: func(t *testing.T, e *matrixEnv) {
				tokens := e.chain.Throttle().Tokens()
				got := e.calls(context.Background(), 50)
				if got["Unavailable CIRCUIT_OPEN"] != 50 {
					t.Errorf("calls = %v, want 50 CIRCUIT_OPEN", got)
				}
				if n := e.f.calls.Load(); n != 0 {
					t.Errorf("%d attempts reached the server through a FORCED_OPEN breaker", n)
				}
				if after := e.chain.Throttle().Tokens(); after != tokens {
					t.Errorf("retry tokens %v → %v: a rejection moved the bucket", tokens, after)
				}
				if m := e.metrics(); m["meshless.throttler.calls rejected"] != 0 {
					t.Errorf("the throttler counted rejections behind a FORCED_OPEN breaker: %v", m)
				}
			},
		},
		{
			name:  "METRICS_ONLY breaker × retries on UNAVAILABLE",
			yaml:  "defaults:\n  circuitBreaker: { mode: METRICS_ONLY, slidingWindowSize: 4, minimumNumberOfCalls: 2 }\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				// 3, 2 and 1 attempts: the retry throttle (10 tokens) stops the
				// retries as it would with the breaker NORMAL (retry.md's example).
				got := e.calls(context.Background(), 3)
				if got["Unavailable"] != 3 || e.f.calls.Load() != 3+2+1 {
					t.Errorf("calls = %v with %d attempts, want 3 UNAVAILABLE after 3, 2 and 1 attempts", got, e.f.calls.Load())
				}
			},
		},
		{
			// retry.md: a method whose retries are off still moves the bucket.
			name:  "retry off × retry throttle",
			yaml:  "defaults:\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 2)
				if got["Unavailable"] != 2 || e.f.calls.Load() != 2 {
					t.Errorf("calls = %v with %d attempts, want 2 UNAVAILABLE, one attempt each", got, e.f.calls.Load())
				}
				if tk := e.chain.Throttle().Tokens(); tk != 8 {
					t.Errorf("tokens = %v, want 8: each failure of a method without retries takes one", tk)
				}
			},
		},
		{
			// hedging.md: hedges share the retry throttle; no hedge while half
			// the tokens or fewer are left.
			name:  "hedging × retry throttle",
			yaml:  "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\nretryThrottling: { maxTokens: 4, tokenRatio: 0.1 }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				// 4 tokens: the first call's copies take 4 → 3 → 2 (2 is not above
				// 4/2: no third copy); every later call sends one copy.
				got := e.calls(context.Background(), 3)
				if got["Unavailable"] != 3 {
					t.Errorf("calls = %v, want 3 UNAVAILABLE", got)
				}
				if n := e.f.calls.Load(); n != 2+1+1 {
					t.Errorf("%d copies reached the server, want 4: 2, then 1 and 1 once the bucket is half empty", n)
				}
			},
		},
		{
			// timeout.md: the caller's earlier deadline governs; the call is
			// not the timeout's, and a done context is never retried.
			name:  "caller deadline shorter than perAttempt × retry",
			yaml:  "defaults:\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(hanging) },
			run: func(t *testing.T, e *matrixEnv) {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				got := e.calls(ctx, 1)
				if took := time.Since(start); took != 200*time.Millisecond {
					t.Errorf("the call took %v, want the caller's 200ms", took)
				}
				if got["DeadlineExceeded"] != 1 || e.f.calls.Load() != 1 {
					t.Errorf("calls = %v with %d attempts, want DEADLINE_EXCEEDED after one attempt", got, e.f.calls.Load())
				}
				if m := e.metrics(); m["meshless.timeout.calls attempt timed_out"] != 0 || m["meshless.timeout.calls overall timed_out"] != 0 {
					t.Errorf("the caller's own deadline counted as a meshless timeout: %v", m)
				}
			},
		},
		{
			// ratelimiter.md: each attempt spends a permit; its rejection is
			// never retried.
			name:  "rate limiter × retry",
			yaml:  "defaults:\n  rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h }\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				// The first call's two attempts spend the 2 permits and its third
				// is refused: the call ends with that refusal (grpc.md: only a
				// retry the adaptive throttler or the retry throttle holds back
				// gives the last attempt's error); the second is refused at once.
				got := e.calls(context.Background(), 2)
				if n := e.f.calls.Load(); n != 2 {
					t.Errorf("%d attempts reached the server, want the 2 permits' worth", n)
				}
				if got["ResourceExhausted RATE_LIMITED"] != 2 {
					t.Errorf("calls = %v, want 2 RATE_LIMITED", got)
				}
			},
		},
		{
			// configuration.md: the throttler is keyed like the breaker.
			name:  "keyBy: method × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { keyBy: method, enabled: true, failureRateThreshold: 100, minimumNumberOfCalls: 100 }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 100)
				if got["ResourceExhausted THROTTLED"] == 0 {
					t.Fatalf("UnaryCall's throttler never engaged: %v", got)
				}
				for range 50 {
					if _, err := e.client.EmptyCall(context.Background(), &testgrpc.Empty{}); err != nil {
						t.Fatalf("EmptyCall = %v: another method's throttler held it back under keyBy: method", err)
					}
				}
			},
		},
		{
			// grpc-server.md, overload.md: a relayed BULKHEAD_FULL is never
			// retried, the breaker ignores it, and it is an overload sign the
			// throttler counts as a refusal; it moves no retry token.
			name:  "server shedding in front × retry, breaker, throttler",
			yaml:  "defaults:\n  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(relayedBulkheadFull) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 200)
				if n := e.f.calls.Load(); int(n) != 200-got["ResourceExhausted THROTTLED"] {
					t.Errorf("%d attempts for %v: a relayed BULKHEAD_FULL was retried", n, got)
				}
				if got["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("the throttler never engaged against a shedding server: %v", got)
				}
				if cb := e.breaker(t); cb.State() != circuitbreaker.StateClosed || cb.Metrics().FailedCalls != 0 {
					t.Errorf("breaker %v with %d failures: it counted the server's shedding", cb.State(), cb.Metrics().FailedCalls)
				}
				if tk := e.chain.Throttle().Tokens(); tk != 10 {
					t.Errorf("retry tokens = %v, want 10: a relayed rejection moves none", tk)
				}
			},
		},
		{
			// timeout.md: a timeout never extends the caller's deadline: the
			// earlier one is what reaches the server (grpc-timeout).
			name: "caller deadline × perAttempt timeout, on the wire",
			yaml: "defaults: {}\n",
			run: func(t *testing.T, e *matrixEnv) {
				var seen atomic.Int64
				e.f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					dl, _ := ctx.Deadline()
					seen.Store(int64(time.Until(dl)))
					return &testgrpc.SimpleResponse{}, nil
				})
				for _, tc := range []struct{ caller, want time.Duration }{{200 * time.Millisecond, 200 * time.Millisecond}, {10 * time.Second, time.Second}} {
					ctx, cancel := context.WithTimeout(context.Background(), tc.caller)
					e.calls(ctx, 1)
					cancel()
					if got := time.Duration(seen.Load()); got != tc.want {
						t.Errorf("caller deadline %v: the server's deadline is %v away, want %v", tc.caller, got, tc.want)
					}
				}
			},
		},
		{
			// configuration.md, observe mode: the timeouts leave the caller's
			// deadline as it was, so none reaches the server from meshless.
			name: "observe × timeouts on the wire",
			yaml: "defaults:\n  mode: observe\n",
			run: func(t *testing.T, e *matrixEnv) {
				var bounded atomic.Bool
				e.f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					_, ok := ctx.Deadline()
					bounded.Store(ok)
					return &testgrpc.SimpleResponse{}, nil
				})
				e.calls(context.Background(), 1)
				if bounded.Load() {
					t.Error("the server got a deadline from a call in observe mode whose caller set none")
				}
			},
		},
		{
			// deadletter.md: what the key's own breaker refuses is deferred,
			// also a retry refused by a breaker the call's own failures opened.
			name:  "dead-letter queue × retry, breaker opening mid-call",
			yaml:  "defaults:\n  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n  deadLetter: { path: \"{{dl}}\" }\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 1)
				if got["Unavailable DEFERRED"] != 1 || e.f.calls.Load() != 2 {
					t.Errorf("calls = %v after %d attempts, want DEFERRED after 2 (the third refused by the breaker they opened)", got, e.f.calls.Load())
				}
			},
		},
		{
			// hedging.md rule 7: a copy refused here sends no more, and the
			// call returns the copies' last answer, not the refusal (a retry
			// returns the refusal, above): not deferred on CIRCUIT_OPEN.
			name:  "dead-letter queue × hedging, breaker opening mid-call",
			yaml:  "defaults:\n  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n  retry: { enabled: false }\n  hedging: { hedgingDelay: 10ms }\n  deadLetter: { path: \"{{dl}}\" }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 1)
				if got["Unavailable"] != 1 || e.f.calls.Load() != 2 || e.breaker(t).State() != circuitbreaker.StateOpen {
					t.Errorf("call = %v after %d copies, breaker %v; want the second copy's UNAVAILABLE, not deferred, the third copy refused by the OPEN breaker",
						got, e.f.calls.Load(), e.breaker(t).State())
				}
			},
		},
		{
			// METRICS_ONLY never refuses: nothing for on: [CIRCUIT_OPEN].
			name:  "dead-letter queue × METRICS_ONLY breaker",
			yaml:  "defaults:\n  circuitBreaker: { mode: METRICS_ONLY, slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n  deadLetter: { path: \"{{dl}}\" }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.calls(context.Background(), 5); got["Unavailable"] != 5 {
					t.Errorf("calls = %v, want 5 UNAVAILABLE, none deferred", got)
				}
			},
		},
		{
			// configuration.md, observe mode: nothing acts — a call is not
			// deferred either, whatever the breaker decided.
			name:  "dead-letter queue × observe",
			yaml:  "defaults:\n  mode: observe\n  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n  deadLetter: { path: \"{{dl}}\", on: [CIRCUIT_OPEN, RETRIES_EXHAUSTED] }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.calls(context.Background(), 5); got["Unavailable"] != 5 || e.f.calls.Load() != 5 {
					t.Errorf("calls = %v after %d attempts, want 5 UNAVAILABLE with one attempt each", got, e.f.calls.Load())
				}
				if st := e.breaker(t).State(); st != circuitbreaker.StateOpen {
					t.Errorf("breaker %v, want OPEN (it decides in observe mode)", st)
				}
			},
		},
		{
			// deadletter.md: on: [RETRIES_EXHAUSTED] defers a call whose every
			// attempt allowed failed with a failure code.
			name:  "dead-letter queue on RETRIES_EXHAUSTED × caller deadline in a backoff",
			yaml:  "defaults:\n  deadLetter: { path: \"{{dl}}\", on: [RETRIES_EXHAUSTED] }\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
				defer cancel()
				// The second backoff would end after the caller's deadline: the
				// retry stops there (timeout.md) with the last attempt's
				// UNAVAILABLE, every attempt allowed having failed: deferred.
				start := time.Now()
				got := e.calls(ctx, 1)
				if got["Unavailable DEFERRED"] != 1 || e.f.calls.Load() != 2 || time.Since(start) != time.Second {
					t.Errorf("call = %v after %d attempts and %v, want DEFERRED after 2 attempts, at 1s", got, e.f.calls.Load(), time.Since(start))
				}
			},
		},
		{
			// hedging.md rule 7: a copy refused here sends no further copy,
			// the copies in flight go on.
			name: "hedging × rate limiter",
			yaml: "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\n  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n",
			setup: func(f *faultServer) {
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					time.Sleep(50 * time.Millisecond)
					return nil, status.Error(codes.Unavailable, "slow failure")
				})
			},
			run: func(t *testing.T, e *matrixEnv) {
				// The second copy is refused (1 permit): no third goes, and the
				// first copy's answer is the call's.
				got := e.calls(context.Background(), 1)
				if got["Unavailable"] != 1 || e.f.calls.Load() != 1 {
					t.Errorf("call = %v after %d copies, want the first copy's UNAVAILABLE", got, e.f.calls.Load())
				}
			},
		},
		{
			// grpc.md, Reload: calls already running finish with the policies
			// they started with (their retry policy).
			name:  "Reload in flight × retry",
			yaml:  "defaults:\n  retry: { initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				done := make(chan outcomes, 1)
				go func() { done <- e.calls(context.Background(), 1) }()
				synctest.Wait() // the first attempt failed; the call waits its backoff
				reload(t, e.chain, "defaults:\n  retry: { enabled: false }\n")
				got := <-done
				if got["Unavailable"] != 1 || e.f.calls.Load() != 3 {
					t.Errorf("call = %v after %d attempts, want the 3 attempts of the policy it started with", got, e.f.calls.Load())
				}
			},
		},
		{
			// overload.md: the throttler's verdict is the breaker's
			// classification, but for RESOURCE_EXHAUSTED, always a refusal: with
			// UNAVAILABLE out of failureStatusCodes, a backend answering
			// UNAVAILABLE to every call is never throttled (HTTP's 503 is, below).
			name:  "failureStatusCodes without UNAVAILABLE × adaptive throttler",
			yaml:  "defaults:\n  circuitBreaker: { failureStatusCodes: [INTERNAL] }\n  retry: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				if got := e.calls(context.Background(), 200); got["Unavailable"] != 200 {
					t.Errorf("calls = %v, want 200 UNAVAILABLE, none throttled", got)
				}
				time.Sleep(11 * time.Second) // the bubble's clock: the window (10s) forgets those accepts
				e.f.setUnary(failing(codes.ResourceExhausted))
				if got := e.calls(context.Background(), 200); got["ResourceExhausted THROTTLED"] == 0 {
					t.Errorf("calls = %v: RESOURCE_EXHAUSTED must be a refusal whatever the lists", got)
				}
			},
		},
		{
			// configuration.md, observe mode: the throttler counts and draws,
			// the retry budget moves, nothing acts.
			name:  "observe × throttler, retry, retry throttle",
			yaml:  "defaults:\n  mode: observe\n  circuitBreaker: { enabled: false }\n  adaptiveThrottling: { minimumRequests: 5 }\n" + shortRetry,
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			run: func(t *testing.T, e *matrixEnv) {
				got := e.calls(context.Background(), 100)
				if got["Unavailable"] != 100 || e.f.calls.Load() != 100 {
					t.Errorf("calls = %v with %d attempts, want 100 UNAVAILABLE with one attempt each", got, e.f.calls.Load())
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

func reload(t *testing.T, chain *grpcmw.Chain, yaml string) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}
