package grpcmw_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestReloadKeepsABreakerWhoseWindowDidNotChange(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5, failureRateThreshold: 90 }
  retry: { enabled: false }
`)
	for range 4 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	before, _ := chain.Breaker(testService)
	reload := func(doc string) {
		t.Helper()
		cfg, err := grpcmw.ParseConfig([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}) // resolves the method anew
	}
	// New thresholds, same window: the same breaker, its 4 failures kept, so
	// the fifth call (5 of 5 failed, above the new 50 %) opens it.
	reload(`
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5, failureRateThreshold: 50 }
  retry: { enabled: false }
`)
	after, _ := chain.Breaker(testService)
	if after != before || after.State() != circuitbreaker.StateOpen {
		t.Fatalf("breaker replaced (%v) or not open (%v): the window's counts were lost", after != before, after.State())
	}
	// A new window: a new breaker, closed and empty.
	reload(`
defaults:
  circuitBreaker: { slidingWindowSize: 20, minimumNumberOfCalls: 5 }
  retry: { enabled: false }
`)
	fresh, _ := chain.Breaker(testService)
	if fresh == before || fresh.State() != circuitbreaker.StateClosed || fresh.Metrics().Calls != 1 {
		t.Fatalf("after a new window: same %v, state %v, %+v", fresh == before, fresh.State(), fresh.Metrics())
	}
	// An invalid config is refused and the old one stays.
	bad := &grpcmw.Config{Defaults: config.Policies{Retry: &config.RetrySection{MaxAttempts: config.Ptr(0)}}}
	if err := chain.Reload(bad); err == nil || !strings.Contains(err.Error(), "defaults.retry.maxAttempts") {
		t.Fatalf("Reload(invalid) = %v", err)
	}
	if *chain.Config().Defaults.CircuitBreaker.SlidingWindowSize != 20 {
		t.Fatal("a refused reload replaced the config")
	}
}

func TestReloadUnderConcurrentLoad(t *testing.T) {
	f := new(faultServer)
	f.setUnary(func(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if req.GetResponseSize()%3 == 0 {
			return nil, status.Error(codes.Unavailable, "flaky")
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { mode: METRICS_ONLY }
  retry: { initialBackoff: 1ms, maxBackoff: 2ms }
`)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{ResponseSize: int32(g + i)})
				// A third of the requests always fail, retries included: the
				// adaptive throttler may hold some back (THROTTLED).
				if c := status.Code(err); c != codes.OK && c != codes.Unavailable && grpcmw.RejectionReason(err) != grpcmw.ReasonThrottled {
					t.Errorf("call = %v", err)
					return
				}
			}
		}()
	}
	for i := range 40 {
		cfg, err := grpcmw.ParseConfig([]byte(fmt.Sprintf(`
defaults:
  circuitBreaker: { mode: METRICS_ONLY, failureRateThreshold: %d }
  retry: { maxAttempts: %d, initialBackoff: 1ms, maxBackoff: 2ms }
  bulkhead: { maxConcurrentCalls: %d }
`, 10+i, 1+i%3, 50+i%2)))
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
	}
	close(stop)
	wg.Wait()
	cb, _ := chain.Breaker(testService)
	if cb.State() != circuitbreaker.StateMetricsOnly || cb.Metrics().Calls == 0 {
		t.Fatalf("breaker %v %+v after reloads", cb.State(), cb.Metrics())
	}
}

// TestTheOrderOfEvents records what each policy reports during one call that
// fails once and is retried: the order of doc.go, attempt by attempt.
func TestTheOrderOfEvents(t *testing.T) {
	f := new(faultServer)
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if f.calls.Load() == 1 {
			return nil, status.Error(codes.Unavailable, "once")
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { initialBackoff: 1ms, maxBackoff: 1ms }
`, grpcmw.WithObserver(obs))
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	got := obs.Trace()
	want := []string{
		"throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry",
		"throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry_done",
		"timeout/overall:call", "call:call",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%v\nwant:\n%v", got, want)
	}
	var names []string
	for _, s := range obs.Sources() {
		names = append(names, s.Kind.String()+"="+s.Name)
	}
	slices.Sort(names)
	wantNames := []string{"bulkhead=grpc.testing.TestService", "call=grpc.testing.TestService/UnaryCall", "circuit_breaker=grpc.testing.TestService", "retry=grpc.testing.TestService/UnaryCall", "throttler=grpc.testing.TestService", "timeout=grpc.testing.TestService/UnaryCall", "timeout=grpc.testing.TestService/UnaryCall"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("sources %v, want %v", names, wantNames)
	}
	_ = resilience.EventCall
}

func TestReloadAppliesNewThrottleSettings(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
retryThrottling: { maxTokens: 2, tokenRatio: 1 }
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms }
`)
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}) // 2 tokens: one attempt, no retry (1 left is not above half)
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d attempts with 2 tokens, want 1", n)
	}
	cfg, _ := grpcmw.ParseConfig([]byte(`
retryThrottling: { maxTokens: 100, tokenRatio: 1 }
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms }
`))
	if err := chain.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	f.calls.Store(0)
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if n := f.calls.Load(); n != 5 {
		t.Fatalf("%d attempts after raising maxTokens to 100, want 5: the old bucket was kept", n)
	}
}
