package grpcmw_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestRateLimiterConfig(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"limit", "defaults: { rateLimiter: { limitForPeriod: 0 } }", "defaults.rateLimiter.limitForPeriod: must be at least 1, got 0"},
		{"period", "services: { a.B: { rateLimiter: { limitRefreshPeriod: 0s } } }", `services."a.B".rateLimiter.limitRefreshPeriod: must be positive, got 0s`},
		{"timeout", "defaults: { rateLimiter: { timeoutDuration: -1s } }", "defaults.rateLimiter.timeoutDuration: must not be negative"},
		{"wrong type", "defaults: { rateLimiter: { limitForPeriod: many } }", `defaults.rateLimiter.limitForPeriod: want an integer, got "many"`},
		{"unknown key", "defaults: { rateLimiter: { limit: 5 } }", "defaults.rateLimiter.limit: unknown key"},
		{"method under keyBy service", "services: { a.B: { methods: { Get: { rateLimiter: { limitForPeriod: 5 } } } } }", `services."a.B".methods.Get.rateLimiter.limitForPeriod: with keyBy: service one rate limiter serves the whole service`},
		{"empty method section under keyBy service", "services: { a.B: { methods: { Get: { rateLimiter: {} } } } }", `services."a.B".methods.Get.rateLimiter: with keyBy: service one rate limiter`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcmw.ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

// The rate limiter is off unless a level writes it; written at the service,
// or per method with keyBy: method, each key has its own; enabled: false
// switches a method's off.
func TestRateLimiterPerKeyAndLevel(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
services:
  grpc.testing.TestService:
    circuitBreaker: { keyBy: method }
    rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h }
    methods:
      EmptyCall: { rateLimiter: { enabled: false } }
`)
	for range 3 {
		_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
	}
	if f.empty.Load() != 3 {
		t.Fatalf("EmptyCall reached the server %d times, want 3: its limiter is switched off", f.empty.Load())
	}
	var limited int
	for range 3 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); grpcmw.RejectionReason(err) == grpcmw.ReasonRateLimited {
			limited++
		}
	}
	if limited != 1 || f.calls.Load() != 2 {
		t.Fatalf("UnaryCall: %d limited, %d reached the server; want 1 and 2", limited, f.calls.Load())
	}
	if l, ok := chain.Limiter(testService + "/UnaryCall"); !ok || l.LimitForPeriod() != 2 {
		t.Fatalf("Limiter(UnaryCall) = %v, %v", l, ok)
	}
	if _, ok := chain.Limiter(testService + "/EmptyCall"); ok {
		t.Fatal("EmptyCall has a limiter, but its section says enabled: false")
	}
	// Reload with the same settings keeps the limiter and its spent period.
	before, _ := chain.Limiter(testService + "/UnaryCall")
	if err := chain.Reload(chain.Config()); err != nil {
		t.Fatal(err)
	}
	_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if after, _ := chain.Limiter(testService + "/UnaryCall"); after != before || grpcmw.RejectionReason(err) != grpcmw.ReasonRateLimited {
		t.Fatalf("after an unchanged Reload: same limiter %v, err %v", after == before, err)
	}
}

// A limit of N per period lets N calls through and rejects the rest at
// once, with RESOURCE_EXHAUSTED and RATE_LIMITED, errors.Is the limiter's
// sentinel; the next period admits N again. The breaker ignores the
// rejections and no retry repeats them.
func TestRateLimiterLimitPerPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
  rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 1s }
`)
		defer stop()
		for period := range 2 {
			start := time.Now()
			var ok, limited int
			for range 5 {
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				switch {
				case err == nil:
					ok++
				case status.Code(err) == codes.ResourceExhausted && grpcmw.RejectionReason(err) == grpcmw.ReasonRateLimited && errors.Is(err, ratelimiter.ErrLimited):
					limited++
				default:
					t.Fatalf("period %d: unexpected %v", period, err)
				}
			}
			if ok != 3 || limited != 2 || time.Since(start) != 0 {
				t.Fatalf("period %d: %d ok, %d limited in %v; want 3, 2, at once", period, ok, limited, time.Since(start))
			}
			time.Sleep(time.Second)
		}
		if f.calls.Load() != 6 {
			t.Fatalf("the server saw %d calls, want 6", f.calls.Load())
		}
		cb, _ := chain.Breaker(testService)
		if m := cb.Metrics(); m.FailedCalls != 0 || m.SuccessfulCalls != 6 {
			t.Fatalf("breaker %+v: rejections must not count", m)
		}
	})
}

// A call that finds the period spent waits for a permit that comes free
// within timeoutDuration, and is rejected at once when none would.
func TestRateLimiterWaitsWithinTimeoutDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		client, _, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1s, timeoutDuration: 1s }
services:
  grpc.testing.TestService:
    circuitBreaker: { keyBy: method }
    methods:
      EmptyCall: { rateLimiter: { timeoutDuration: 500ms } }
`)
		defer stop()
		ctx := context.Background()
		start := time.Now()
		if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil || time.Since(start) != time.Second {
			t.Fatalf("the waiting call: %v after %v, want its permit at 1s", err, time.Since(start))
		}
		start = time.Now()
		if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatal(err)
		}
		_, err := client.EmptyCall(ctx, &testgrpc.Empty{})
		if grpcmw.RejectionReason(err) != grpcmw.ReasonRateLimited || time.Since(start) != 0 {
			t.Fatalf("no permit within 500ms: %v after %v, want RATE_LIMITED at once", err, time.Since(start))
		}
	})
}

// A server's rate limiter answers RESOURCE_EXHAUSTED with RATE_LIMITED; a
// meshless client one hop up that retries RESOURCE_EXHAUSTED does not retry
// it, and its breaker ignores it.
func TestRateLimitedOnTheWireIsNotRetriedOneHopUp(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`defaults: { rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h } }`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcmw.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var arrived atomic.Int32 // calls that reached the server, limited or not
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		arrived.Add(1)
		return h(ctx, req)
	}
	f := new(faultServer)
	addr, _ := serve(t, f, grpc.ChainUnaryInterceptor(count, srv.UnaryServerInterceptor()))
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [RESOURCE_EXHAUSTED, UNAVAILABLE] }
`)
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.ResourceExhausted || grpcmw.RejectionReason(err) != grpcmw.ReasonRateLimited {
		t.Fatalf("got %v, want the server's RATE_LIMITED", err)
	}
	if errors.Is(err, ratelimiter.ErrLimited) {
		t.Fatal("a relayed rejection matches ErrLimited here, as if this client's limiter had refused")
	}
	if arrived.Load() != 2 || f.calls.Load() != 1 {
		t.Fatalf("%d calls arrived, %d reached the handler; want 2 and 1 (no retry of RATE_LIMITED)", arrived.Load(), f.calls.Load())
	}
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.FailedCalls != 0 || m.SuccessfulCalls != 1 {
		t.Fatalf("client breaker %+v: the relayed RATE_LIMITED must be ignored", m)
	}
}

// Under -race, many goroutines through one chain never get more than the
// limit through in a period.
func TestRateLimiterStressNeverExceedsTheLimit(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  rateLimiter: { limitForPeriod: 25, limitRefreshPeriod: 1h }
`)
	var wg sync.WaitGroup
	var ok, limited atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
				switch {
				case err == nil:
					ok.Add(1)
				case grpcmw.RejectionReason(err) == grpcmw.ReasonRateLimited:
					limited.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 25 || limited.Load() != 55 || f.calls.Load() != 25 {
		t.Fatalf("%d ok, %d limited, %d at the server; want 25, 55, 25", ok.Load(), limited.Load(), f.calls.Load())
	}
}

// The rate limiter sits inside the breaker (an open breaker spends no
// quota) and outside the bulkhead.
func TestTheOrderOfEventsWithARateLimiter(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  rateLimiter: { limitForPeriod: 100, limitRefreshPeriod: 1h }
`, grpcmw.WithObserver(obs))
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"rate_limiter:acquired", "throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "timeout/overall:call", "call:call"}
	if got := obs.Trace(); !slices.Equal(got, want) {
		t.Fatalf("events:\n%v\nwant:\n%v", got, want)
	}
	cb, _ := chain.Breaker(testService)
	cb.ForceOpen()
	obs.Reset()
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
		t.Fatalf("got %v, want CIRCUIT_OPEN", err)
	}
	if got := obs.Trace(); slices.Contains(got, "rate_limiter:acquired") {
		t.Fatalf("an open breaker spent quota: %v", got)
	}
}

// A call the rate limiter refused is reported with error.type rate_limited
// (meshless.call.duration).
func TestRateLimitedCallErrorType(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }
`, grpcmw.WithObserver(obs))
	for range 2 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	var types []string
	for _, r := range obs.Recorded() {
		if r.Source.Kind == resilience.KindCall {
			types = append(types, r.Event.ErrorType)
		}
	}
	if !slices.Equal(types, []string{"", "rate_limited"}) {
		t.Fatalf("error types %q, want OK then rate_limited", types)
	}
}
