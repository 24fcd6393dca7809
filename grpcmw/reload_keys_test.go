package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// reloadEnv is one row of TestEachKeyAfterAReload: a client whose calls
// with the payload "hold" wait at the server for release, and whose other
// calls get the code answer says.
type reloadEnv struct {
	t       *testing.T
	f       *faultServer
	client  testgrpc.TestServiceClient
	chain   *grpcmw.Chain
	answer  atomic.Uint32 // a codes.Code
	release chan codes.Code
}

// outcome names a call's answer: its code, and the rejection's reason.
func outcome(err error) string {
	k := status.Code(err).String()
	if r := grpcmw.RejectionReason(err); r != "" {
		k += " " + r
	}
	return k
}

func (e *reloadEnv) serve(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	code := codes.Code(e.answer.Load())
	if string(req.GetPayload().GetBody()) == "hold" {
		select {
		case code = <-e.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if code != codes.OK {
		return nil, status.Error(code, "scripted")
	}
	return &testgrpc.SimpleResponse{}, nil
}

// call makes a call that does not wait at the server.
func (e *reloadEnv) call() string {
	_, err := e.client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
	return outcome(err)
}

// start makes a call on a goroutine, waits until it is blocked (at the
// server when it holds, else in a backoff or a queue), and returns its
// outcome's channel.
func (e *reloadEnv) start(hold bool) <-chan string {
	req := &testgrpc.SimpleRequest{}
	if hold {
		req.Payload = &testgrpc.Payload{Body: []byte("hold")}
	}
	done := make(chan string, 1)
	go func() {
		_, err := e.client.UnaryCall(context.Background(), req)
		done <- outcome(err)
	}()
	synctest.Wait()
	return done
}

func (e *reloadEnv) reload(yaml string) {
	e.t.Helper()
	reload(e.t, e.chain, yaml)
}

func (e *reloadEnv) breaker() *circuitbreaker.Breaker {
	e.t.Helper()
	cb, ok := e.chain.Breaker(testService)
	if !ok {
		e.t.Fatal("no breaker for the service")
	}
	return cb
}

func (e *reloadEnv) want(what, got, want string) {
	e.t.Helper()
	if got != want {
		e.t.Errorf("%s: %s, want %s", what, got, want)
	}
}

// Each key, changed by a reload while a call is in flight (waiting at the
// server, or out a backoff), takes effect as grpc.md's Reload and
// reload.md say: every call that starts after Reload returns resolves the
// new settings; a call in flight finishes with the policies it started
// with, but for a kept breaker, the same instance, whose new thresholds
// and mode reach it; state is kept or started afresh as documented.
// (keyBy, a section switched off: TestAReloadClosesTheBreakersAndBulkheadsNoKeyUses;
// retryThrottling's tokens: TestReloadAppliesNewThrottleSettings; deadLetter:
// TestAReloadAppliesNewDeadLetterSettingsToTheEntriesWaiting.)
func TestEachKeyAfterAReload(t *testing.T) {
	const base = "defaults:\n  adaptiveThrottling: { enabled: false }\n"
	const noRetry = "  retry: { enabled: false }\n"
	tests := []struct {
		name   string
		yaml   string // base is prepended; the row reloads base + its own
		answer codes.Code
		run    func(e *reloadEnv)
	}{
		{
			name:   "circuitBreaker.minimumNumberOfCalls: a kept breaker's new threshold counts the call in flight",
			yaml:   noRetry + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				e.want("first call", e.call(), "Unavailable")
				held, b := e.start(true), e.breaker()
				e.reload(base + noRetry + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }\n")
				if e.breaker() != b {
					e.t.Fatal("a reload that keeps the window replaced the breaker")
				}
				e.release <- codes.Unavailable
				e.want("the call in flight", <-held, "Unavailable")
				e.want("the breaker after the call in flight", e.breaker().State().String(), "OPEN")
				e.want("a new call", e.call(), "Unavailable CIRCUIT_OPEN")
			},
		},
		{
			name:   "circuitBreaker.slidingWindowSize: a new breaker, built by Reload; the call in flight ends on the old one",
			yaml:   noRetry + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				e.want("first call", e.call(), "Unavailable")
				held, old := e.start(true), e.breaker()
				e.reload(base + noRetry + "  circuitBreaker: { slidingWindowSize: 6, minimumNumberOfCalls: 2 }\n")
				b := e.breaker()
				if b == old || b.State() != circuitbreaker.StateClosed || b.Metrics().Calls != 0 {
					e.t.Fatalf("after the reload: the same breaker %v, %v with %d calls; want a new one, CLOSED and empty", b == old, b.State(), b.Metrics().Calls)
				}
				e.release <- codes.Unavailable
				e.want("the call in flight", <-held, "Unavailable")
				if n, m := b.Metrics().Calls, old.Metrics().Calls; n != 0 || m != 2 {
					e.t.Errorf("the new breaker counts %d calls, the old one %d: want the call in flight on the old one (0, 2)", n, m)
				}
			},
		},
		{
			name: "circuitBreaker.mode: FORCED_OPEN at Reload, the call admitted before ends as it would; NORMAL closes it",
			yaml: noRetry + "  circuitBreaker: {}\n",
			run: func(e *reloadEnv) {
				e.want("first call", e.call(), "OK")
				held := e.start(true)
				e.reload(base + noRetry + "  circuitBreaker: { mode: FORCED_OPEN }\n")
				e.want("the breaker at Reload", e.breaker().State().String(), "FORCED_OPEN")
				e.want("a new call", e.call(), "Unavailable CIRCUIT_OPEN")
				e.release <- codes.OK
				e.want("the call in flight", <-held, "OK")
				e.reload(base + noRetry + "  circuitBreaker: { mode: NORMAL }\n")
				e.want("the breaker after mode: NORMAL", e.breaker().State().String(), "CLOSED")
			},
		},
		{
			name:   "circuitBreaker.waitDurationInOpenState: a running open wait keeps its length, the next one is the new",
			yaml:   noRetry + "  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, permittedNumberOfCallsInHalfOpenState: 1, waitDurationInOpenState: 10s }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				e.call()
				e.call()
				e.want("the breaker", e.breaker().State().String(), "OPEN")
				e.reload(base + noRetry + "  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, permittedNumberOfCallsInHalfOpenState: 1, waitDurationInOpenState: 1s }\n")
				time.Sleep(2 * time.Second)
				e.want("a call 2s after the open, 1s wait reloaded", e.call(), "Unavailable CIRCUIT_OPEN")
				time.Sleep(9 * time.Second)
				e.answer.Store(uint32(codes.OK))
				e.want("the probe after 11s", e.call(), "OK")
				e.answer.Store(uint32(codes.Unavailable))
				e.call()
				e.call()
				e.want("the breaker, open again", e.breaker().State().String(), "OPEN")
				time.Sleep(1500 * time.Millisecond)
				e.want("a probe 1.5s later", e.call(), "Unavailable")
			},
		},
		{
			name:   "circuitBreaker.enabled: false: the breaker goes at Reload, the call in flight ends on it, new calls have none",
			yaml:   noRetry + "  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				e.call()
				held := e.start(true)
				e.reload(base + noRetry + "  circuitBreaker: { enabled: false }\n")
				if _, ok := e.chain.Breaker(testService); ok {
					e.t.Error("the breaker is still the chain's after circuitBreaker: { enabled: false }")
				}
				e.release <- codes.Unavailable
				e.want("the call in flight", <-held, "Unavailable")
				for range 3 {
					e.want("a new call", e.call(), "Unavailable")
				}
			},
		},
		{
			name:   "circuitBreaker.failureStatusCodes: the call in flight is classified as it started, new calls by the new list",
			yaml:   noRetry + "  circuitBreaker: {}\n",
			answer: codes.NotFound,
			run: func(e *reloadEnv) {
				held := e.start(true)
				e.reload(base + noRetry + "  circuitBreaker: { failureStatusCodes: [NOT_FOUND, UNAVAILABLE] }\n")
				e.release <- codes.NotFound
				e.want("the call in flight", <-held, "NotFound")
				e.want("a new call", e.call(), "NotFound")
				m := e.breaker().Metrics()
				if m.SuccessfulCalls != 1 || m.FailedCalls != 1 {
					e.t.Errorf("the breaker counts %d successes and %d failures, want the call in flight a success, the new one a failure", m.SuccessfulCalls, m.FailedCalls)
				}
			},
		},
		{
			name: "bulkhead.maxConcurrentCalls shrinks: the new bulkhead starts empty at the next call, the old one gets its permits back",
			yaml: noRetry + "  bulkhead: { maxConcurrentCalls: 2 }\n",
			run: func(e *reloadEnv) {
				held := []<-chan string{e.start(true), e.start(true)}
				e.want("a third call", e.call(), "ResourceExhausted BULKHEAD_FULL")
				old, _ := e.chain.Bulkhead(testService)
				e.reload(base + noRetry + "  bulkhead: { maxConcurrentCalls: 1 }\n")
				if b, _ := e.chain.Bulkhead(testService); b != old {
					e.t.Error("the bulkhead was replaced before its key's next call")
				}
				held = append(held, e.start(true)) // the new bulkhead's one permit
				e.want("a call past the new limit", e.call(), "ResourceExhausted BULKHEAD_FULL")
				b, _ := e.chain.Bulkhead(testService)
				if b == old || b.Limit() != 1 {
					e.t.Fatalf("after the next call: the same bulkhead %v, limit %d", b == old, b.Limit())
				}
				for _, h := range held {
					e.release <- codes.OK
					e.want("a call in flight", <-h, "OK")
				}
				if old.Active() != 0 || b.Active() != 0 {
					e.t.Errorf("permits held after every call ended: old %d, new %d", old.Active(), b.Active())
				}
			},
		},
		{
			name: "bulkhead.maxWaitDuration: a call queued on the old bulkhead gets its permit from the calls in flight",
			yaml: noRetry + "  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }\n",
			run: func(e *reloadEnv) {
				first := e.start(true)
				queued := e.start(true) // waits for the bulkhead, not at the server
				if n := e.f.calls.Load(); n != 1 {
					e.t.Fatalf("the server saw %d calls, want the first only", n)
				}
				e.reload(base + noRetry + "  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 0s }\n")
				e.release <- codes.OK
				e.want("the first call", <-first, "OK")
				synctest.Wait() // the queued call takes the old bulkhead's permit
				e.release <- codes.OK
				e.want("the queued call", <-queued, "OK")
			},
		},
		{
			name: "hedging switched on: the call in flight is not hedged, a new call is",
			yaml: noRetry,
			run: func(e *reloadEnv) {
				held := e.start(true)
				e.reload(base + "  retry: { enabled: false }\n  hedging: { maxAttempts: 2, hedgingDelay: 200ms }\n")
				time.Sleep(500 * time.Millisecond) // within the 1s per-attempt timeout
				synctest.Wait()
				if n := e.f.calls.Load(); n != 1 {
					e.t.Errorf("the server saw %d attempts of the call in flight, want 1", n)
				}
				e.release <- codes.OK
				e.want("the call in flight", <-held, "OK")
				late := e.start(true)
				time.Sleep(500 * time.Millisecond) // within the 1s per-attempt timeout
				synctest.Wait()
				if n := e.f.calls.Load(); n != 3 {
					e.t.Errorf("the server saw %d attempts, want the new call hedged (1 + 2)", n)
				}
				e.release <- codes.OK
				e.want("the hedged call", <-late, "OK")
			},
		},
		{
			name: "rateLimiter: kept with what its period spent while unchanged, a fresh period when limitForPeriod changes",
			yaml: noRetry + "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n",
			run: func(e *reloadEnv) {
				e.want("first call", e.call(), "OK")
				e.want("second call", e.call(), "ResourceExhausted RATE_LIMITED")
				e.reload(base + noRetry + "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n  timeout: { perAttempt: 2s }\n")
				e.want("after a reload that kept it", e.call(), "ResourceExhausted RATE_LIMITED")
				e.reload(base + noRetry + "  rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h }\n")
				e.want("after limitForPeriod: 2, call 1", e.call(), "OK")
				e.want("call 2", e.call(), "OK")
				e.want("call 3", e.call(), "ResourceExhausted RATE_LIMITED")
			},
		},
		{
			name:   "retry.maxAttempts: a call waiting out a backoff keeps its policy, new calls take the new one",
			yaml:   "  retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\nretryThrottling: { enabled: false }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				waiting := e.start(false)
				e.reload(base + "  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\nretryThrottling: { enabled: false }\n")
				e.want("the call in flight", <-waiting, "Unavailable")
				if n := e.f.calls.Load(); n != 3 {
					e.t.Errorf("the call in flight made %d attempts, want its own policy's 3", n)
				}
				e.call()
				if n := e.f.calls.Load() - 3; n != 2 {
					e.t.Errorf("a new call made %d attempts, want the new policy's 2", n)
				}
			},
		},
		{
			name: "timeout.perAttempt: the call in flight keeps its deadline, new calls take the new one",
			yaml: noRetry + "  timeout: { perAttempt: 10s, overall: 20s }\n",
			run: func(e *reloadEnv) {
				held := e.start(true)
				e.reload(base + noRetry + "  timeout: { perAttempt: 1s, overall: 2s }\n")
				time.Sleep(5 * time.Second)
				e.release <- codes.OK
				e.want("the call in flight, answered after 5s", <-held, "OK")
				late := e.start(true)
				time.Sleep(1500 * time.Millisecond)
				e.want("a new call held 1.5s", <-late, "DeadlineExceeded")
			},
		},
		{
			name:   "retryThrottling: new values mean a new, full bucket; the call in flight spends the old one",
			yaml:   "  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\nretryThrottling: { maxTokens: 10, tokenRatio: 0.1 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				waiting, old := e.start(false), e.chain.Throttle()
				e.reload(base + "  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\nretryThrottling: { maxTokens: 20, tokenRatio: 0.1 }\n")
				th := e.chain.Throttle()
				e.want("the call in flight", <-waiting, "Unavailable")
				if th == old || th.Tokens() != 20 || old.Tokens() != 8 {
					e.t.Errorf("tokens: new bucket %v (%v), old %v; want a new bucket of 20, the call in flight's two failures in the old one (8)", th.Tokens(), th != old, old.Tokens())
				}
			},
		},
		{
			name:   "mode: observe to enforce: the call in flight stays observed, new calls are enforced",
			yaml:   "  mode: observe\n  circuitBreaker: { mode: FORCED_OPEN }\n  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				held := e.start(true) // the FORCED_OPEN breaker's refusal, observed, let it through
				e.reload(base + "  mode: enforce\n  circuitBreaker: { mode: FORCED_OPEN }\n  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n")
				e.want("a new call", e.call(), "Unavailable CIRCUIT_OPEN")
				e.release <- codes.Unavailable
				e.want("the call in flight", <-held, "Unavailable")
				if n := e.f.calls.Load(); n != 1 {
					e.t.Errorf("the server saw %d attempts, want the observed call's one (an observed retry decides without acting)", n)
				}
			},
		},
		{
			name:   "a service removed from the YAML (its descriptor linked in): the defaults apply, the breaker is kept",
			yaml:   noRetry + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }\nservices:\n  grpc.testing.TestService:\n    circuitBreaker: { minimumNumberOfCalls: 2 }\n",
			answer: codes.Unavailable,
			run: func(e *reloadEnv) {
				e.call()
				e.call()
				b := e.breaker()
				e.reload(base + noRetry + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }\n")
				if e.breaker() != b || b.State() != circuitbreaker.StateOpen || b.Config().MinimumNumberOfCalls != 4 {
					e.t.Errorf("after the reload: the same breaker %v, %v, minimumNumberOfCalls %d; want it kept, OPEN, with the defaults' 4",
						e.breaker() == b, b.State(), b.Config().MinimumNumberOfCalls)
				}
			},
		},
		{
			name: "outlierDetection, healthCheck, cluster: refused, the configuration in force stays",
			yaml: noRetry + "  circuitBreaker: {}\n",
			run: func(e *reloadEnv) {
				before := e.chain.Config()
				for _, extra := range []string{"outlierDetection: {}\n", "healthCheck: { serviceName: \"\" }\n", "cluster: { redis: { addr: \"127.0.0.1:1\" } }\n"} {
					cfg, err := grpcmw.ParseConfig([]byte(base + noRetry + extra))
					if err != nil {
						e.t.Fatal(err)
					}
					if err := e.chain.Reload(cfg); err == nil {
						e.t.Errorf("a reload that adds %q was accepted", extra)
					}
				}
				if e.chain.Config() != before {
					e.t.Error("a refused reload changed the configuration in force")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := &reloadEnv{t: t, f: new(faultServer), release: make(chan codes.Code)}
				e.answer.Store(uint32(tt.answer))
				e.f.setUnary(e.serve)
				client, chain, stop := inBubble(t, e.f, base+tt.yaml)
				defer stop()
				e.client, e.chain = client, chain
				tt.run(e)
			})
		})
	}
}
