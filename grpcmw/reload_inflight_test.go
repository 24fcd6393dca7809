package grpcmw_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// ifEnv holds the calls of TestACallInFlightAcrossAReloadEndsOnThePoliciesItStartedWith
// at the server until release is closed; then they answer UNAVAILABLE.
// Calls with no payload answer OK at once.
type ifEnv struct {
	release chan struct{}
}

func (e *ifEnv) wait(ctx context.Context) error {
	select {
	case <-e.release:
		return status.Error(codes.Unavailable, "scripted")
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// ifResult is what a scenario saw of its call in flight.
type ifResult struct {
	outcome  string
	attempts int64 // at the server
	// calls and failed are what the call in flight left in the breaker it
	// started on.
	calls, failed int64
}

// A call in flight across a reload — a unary call, a hedged one, a server
// stream, hedged or not, a bidirectional stream — started under A and ended after
// Reload(B), or after Reload(B) then Reload(A), ends as it would have with
// no reload (reload.md, "calls in flight"): the same outcome and attempts
// (B's hedging does not reach it), its outcome counted once, in the
// breaker it started on (B's window makes a new one, which counts only
// the calls that start after Reload; B's thresholds keep it), its
// bulkhead permits given back to the bulkhead they came from; and the
// bulkhead gauge never goes below 0 and is 0 when every call has ended.
func TestACallInFlightAcrossAReloadEndsOnThePoliciesItStartedWith(t *testing.T) {
	const base = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n  timeout: { perAttempt: 1h, overall: 2h }\n"
	a := func(extra string) string {
		return base + "  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }\n  bulkhead: { maxConcurrentCalls: 4 }\n" + extra
	}
	bs := map[string]func(extra string) string{
		"B changes the window": func(string) string {
			return base + "  circuitBreaker: { slidingWindowSize: 20, minimumNumberOfCalls: 20 }\n  bulkhead: { maxConcurrentCalls: 2 }\n" +
				"  hedging: { maxAttempts: 3, hedgingDelay: 100ms }\n"
		},
		"B changes thresholds": func(string) string {
			return base + "  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }\n  bulkhead: { maxConcurrentCalls: 2 }\n" +
				"  hedging: { maxAttempts: 3, hedgingDelay: 100ms }\n"
		},
	}
	kinds := []struct{ name, extra string }{
		{"unary", ""},
		{"hedged", "  hedging: { maxAttempts: 2, hedgingDelay: 200ms }\n"},
		{"server stream", ""},
		{"hedged server stream", "  hedging: { maxAttempts: 2, hedgingDelay: 200ms }\n"},
		{"bidi", ""},
	}
	for _, k := range kinds {
		var want ifResult
		t.Run(k.name+"/no reload", func(t *testing.T) {
			want = ifScenario(t, k.name, a(k.extra), nil)
		})
		for bname, b := range bs {
			for _, back := range []bool{false, true} {
				reloads := []string{b(k.extra)}
				name := k.name + "/" + bname
				if back {
					reloads = append(reloads, a(k.extra))
					name += ", then back to A"
				}
				t.Run(name, func(t *testing.T) {
					if got := ifScenario(t, k.name, a(k.extra), reloads); got != want {
						t.Errorf("the call in flight: %+v, want %+v as with no reload", got, want)
					}
				})
			}
		}
	}
}

// ifScenario starts a call of kind under yamlA, reloads each of reloads in
// turn, makes a call under the last, ends the call in flight and reports
// what it saw.
func ifScenario(t *testing.T, kind, yamlA string, reloads []string) (res ifResult) {
	synctest.Test(t, func(t *testing.T) {
		e := &ifEnv{release: make(chan struct{})}
		f := new(faultServer)
		f.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if req.GetPayload() == nil {
				return &testgrpc.SimpleResponse{}, nil
			}
			return nil, e.wait(ctx)
		})
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
			return e.wait(s.Context())
		})
		bidi := func(s testgrpc.TestService_FullDuplexCallServer) error { return e.wait(s.Context()) }
		f.bidi.Store(&bidi)
		client, chain, metrics, stop := observed(t, f, yamlA)
		defer stop()
		active := func(when string) int64 {
			t.Helper()
			n := metrics()["meshless.bulkhead.call.active"]
			if n < 0 {
				t.Errorf("%s: the bulkhead gauge reads %d calls in flight", when, n)
			}
			return n
		}
		ctx := context.Background()
		done := make(chan error, 1)
		go func() {
			var err error
			switch kind {
			case "server stream", "hedged server stream":
				var s testgrpc.TestService_StreamingOutputCallClient
				if s, err = client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}); err == nil {
					_, err = s.Recv()
				}
			case "bidi":
				var s testgrpc.TestService_FullDuplexCallClient
				if s, err = client.FullDuplexCall(ctx); err == nil {
					if err = s.Send(&testgrpc.StreamingOutputCallRequest{}); err == nil || err == io.EOF {
						_ = s.CloseSend()
						_, err = s.Recv()
					}
				}
			default:
				_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{}})
			}
			done <- err
		}()
		time.Sleep(500 * time.Millisecond) // a hedge goes after 200ms
		synctest.Wait()
		started := f.calls.Load()
		oldCB, ok := chain.Breaker(testService)
		if !ok {
			t.Fatal("no breaker")
		}
		oldBH, _ := chain.Bulkhead(testService)
		if n := active("before the reload"); n != int64(started) {
			t.Errorf("before the reload: %d calls in flight on the gauge, %d attempts at the server", n, started)
		}
		for _, y := range reloads {
			reload(t, chain, y)
		}
		// A call under the configuration in force: the key's new bulkhead
		// (when its settings changed) is made, and the old one's gauges go.
		if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
			t.Fatalf("a call after the reload: %v", err)
		}
		active("after a call under the new configuration")
		time.Sleep(time.Second) // B's hedges would go
		synctest.Wait()
		res.attempts = int64(f.calls.Load() - 1) // but the call after the reload
		close(e.release)
		res.outcome = outcome(<-done)
		synctest.Wait()
		if n := active("after every call ended"); n != 0 {
			t.Errorf("after every call ended the bulkhead gauge reads %d calls in flight", n)
		}
		if oldBH.Active() != 0 {
			t.Errorf("the bulkhead the call started on holds %d permits after it ended", oldBH.Active())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Errorf("the bulkhead in force holds %d permits after every call ended", bh.Active())
		}
		m := oldCB.Metrics()
		res.calls, res.failed = m.Calls, m.FailedCalls
		cb, _ := chain.Breaker(testService)
		if cb == oldCB {
			res.calls-- // the call after the reload
		} else if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 0 {
			t.Errorf("the breaker made by the reload counts %d calls, %d failed: want the call after it only", m.Calls, m.FailedCalls)
		}
	})
	return res
}

// A call waiting out a backoff across a reload retries through the
// policies it started with (reload.md, "calls in flight"): its retry
// policy's attempts (not B's), the bulkhead it started on (not B's new
// one, full here of a call that started after the reload), and, when B's
// window replaced the breaker, the old breaker: every attempt is counted
// there, once, and none in the new one.
func TestARetryAfterAReloadGoesThroughThePoliciesItsCallStartedWith(t *testing.T) {
	const base = "retryThrottling: { enabled: false }\ndefaults:\n  adaptiveThrottling: { enabled: false }\n  timeout: { perAttempt: 1h, overall: 2h }\n"
	const yamlA = base + "  retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n" +
		"  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }\n  bulkhead: { maxConcurrentCalls: 4 }\n"
	const yamlB = base + "  retry: { maxAttempts: 2, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }\n" +
		"  circuitBreaker: { slidingWindowSize: 20, minimumNumberOfCalls: 20 }\n  bulkhead: { maxConcurrentCalls: 1 }\n"
	for _, back := range []bool{false, true} {
		t.Run(fmt.Sprintf("back to A %v", back), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				var failed atomic.Int32
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					switch string(req.GetPayload().GetBody()) {
					case "fail":
						failed.Add(1)
						return nil, status.Error(codes.Unavailable, "scripted")
					case "hold":
						select {
						case <-release:
						case <-ctx.Done():
							return nil, status.FromContextError(ctx.Err()).Err()
						}
					}
					return &testgrpc.SimpleResponse{}, nil
				})
				client, chain, metrics, stop := observed(t, f, yamlA)
				defer stop()
				ctx := context.Background()
				call := func(body string) <-chan string {
					done := make(chan string, 1)
					go func() {
						_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(body)}})
						done <- outcome(err)
					}()
					synctest.Wait()
					return done
				}
				waiting := call("fail") // its first attempt failed: it waits out a backoff
				oldCB, _ := chain.Breaker(testService)
				oldBH, _ := chain.Bulkhead(testService)
				reload(t, chain, yamlB)
				want := 1 // the new bulkhead's one permit
				if back {
					reload(t, chain, yamlA)
					want = 3 // A's bulkhead, kept (no call between the reloads): one permit left for the retries
				}
				var held []<-chan string
				for range want {
					held = append(held, call("hold"))
				}
				if got := <-waiting; got != "Unavailable" || failed.Load() != 3 {
					t.Errorf("the call in flight: %s after %d attempts, want Unavailable after its own policy's 3", got, failed.Load())
				}
				if m := oldCB.Metrics(); m.Calls != 3 || m.FailedCalls != 3 {
					t.Errorf("the breaker the call started on counts %d calls, %d failed; want its 3 attempts", m.Calls, m.FailedCalls)
				}
				close(release)
				for _, h := range held {
					if got := <-h; got != "OK" {
						t.Errorf("a call held after the reload: %s", got)
					}
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); cb == oldCB || m.Calls != int64(want) {
					t.Errorf("the breaker in force (the same %v) counts %d calls, want a new one with the %d calls after the reload", cb == oldCB, m.Calls, want)
				}
				if n := metrics()["meshless.bulkhead.call.active"]; n != 0 || oldBH.Active() != 0 {
					t.Errorf("after every call ended: the gauge reads %d calls in flight, the old bulkhead holds %d", n, oldBH.Active())
				}
			})
		})
	}
}

// A hedged call in flight when a reload forces its kept breaker open: the
// breaker is the same instance (reload.md), so the hedge that comes due
// after the reload is refused by it and never sent, and the copy in flight
// goes on and answers the call (hedging.md: a meshless rejection is never
// hedged, the copies in flight go on). For a unary call and a hedged
// server stream.
func TestAHedgeAfterAReloadForcesTheBreakerOpenIsRefusedAndTheCopyInFlightAnswers(t *testing.T) {
	const base = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n  timeout: { perAttempt: 1h, overall: 2h }\n" +
		"  hedging: { maxAttempts: 2, hedgingDelay: 500ms }\n"
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					select {
					case <-release:
						return &testgrpc.SimpleResponse{}, nil
					case <-ctx.Done():
						return nil, status.FromContextError(ctx.Err()).Err()
					}
				})
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					select {
					case <-release:
						return s.Send(&testgrpc.StreamingOutputCallResponse{})
					case <-s.Context().Done():
						return status.FromContextError(s.Context().Err()).Err()
					}
				})
				client, chain, stop := inBubble(t, f, base+"  circuitBreaker: {}\n")
				defer stop()
				ctx := context.Background()
				done := make(chan error, 1)
				go func() {
					if !stream {
						_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
						done <- err
						return
					}
					s, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
					for err == nil { // read to the end: the stream is done with
						_, err = s.Recv()
					}
					if err == io.EOF {
						err = nil
					}
					done <- err
				}()
				time.Sleep(100 * time.Millisecond)
				synctest.Wait()
				reload(t, chain, base+"  circuitBreaker: { mode: FORCED_OPEN }\n")
				time.Sleep(time.Second) // the hedge comes due
				synctest.Wait()
				if n := f.calls.Load(); n != 1 {
					t.Errorf("the server saw %d copies, want the first only (the hedge refused by the breaker)", n)
				}
				close(release)
				if err := <-done; err != nil {
					t.Errorf("the call: %v, want the copy in flight's answer", err)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.NotPermittedCalls != 1 {
					t.Errorf("the breaker refused %d calls, want the hedge", m.NotPermittedCalls)
				}
			})
		})
	}
}

// A call waiting for a rate limiter's permit when a reload changes the
// limiter waits on the old one (reload.md) and is admitted at its next
// period, while the key's next call, under B, takes the new limiter's
// full period at once; after B and back to A with no call between, A's
// limiter is kept with what its period spent.
func TestACallWaitingOnARateLimiterAcrossAReloadWaitsOnTheOldOne(t *testing.T) {
	const base = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n  timeout: { perAttempt: 1h, overall: 2h }\n"
	const yamlA = base + "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 10s, timeoutDuration: 20s }\n"
	const yamlB = base + "  rateLimiter: { limitForPeriod: 5, limitRefreshPeriod: 10s, timeoutDuration: 20s }\n"
	for _, back := range []bool{false, true} {
		t.Run(fmt.Sprintf("back to A %v", back), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					return &testgrpc.SimpleResponse{}, nil
				})
				client, chain, stop := inBubble(t, f, yamlA)
				defer stop()
				ctx := context.Background()
				call := func() (string, time.Duration) {
					start := time.Now()
					_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
					return outcome(err), time.Since(start)
				}
				if got, _ := call(); got != "OK" {
					t.Fatalf("the first call: %s", got)
				}
				type res struct {
					out  string
					took time.Duration
				}
				waiting := make(chan res, 1)
				go func() { o, d := call(); waiting <- res{o, d} }()
				time.Sleep(time.Second)
				synctest.Wait() // it waits for the limiter's next period
				reload(t, chain, yamlB)
				want, wantTook := "OK", time.Duration(0)
				if back {
					reload(t, chain, yamlA)
					// A's limiter, kept: its period spent, the next one the
					// waiting call's, so the one after (at 20s).
					want, wantTook = "OK", 19*time.Second
				}
				if got, took := call(); got != want || took != wantTook {
					t.Errorf("a call after the reload: %s in %v, want %s in %v", got, took, want, wantTook)
				}
				if r := <-waiting; r.out != "OK" || r.took != 10*time.Second {
					t.Errorf("the call waiting across the reload: %s in %v, want OK at the old limiter's next period (10s)", r.out, r.took)
				}
			})
		})
	}
}
