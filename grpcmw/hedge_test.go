package grpcmw_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// scripted answers the n-th call (from 1) after delays[n-1] with
// codes[n-1] (OK: a reply whose username is the call's number), or with
// CANCELLED when the call's context ends first, which it counts.
type scripted struct {
	delays    []time.Duration
	codes     []codes.Code
	n         atomic.Int32
	cancelled atomic.Int32
	previous  atomic.Value // the grpc-previous-rpc-attempts header of the last call that had one
}

func (s *scripted) handler(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	n := int(s.n.Add(1))
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(grpcmw.PreviousAttemptsHeader)) > 0 {
		s.previous.Store(md.Get(grpcmw.PreviousAttemptsHeader)[0])
	}
	i := min(n, len(s.delays)) - 1
	select {
	case <-time.After(s.delays[i]):
	case <-ctx.Done():
		s.cancelled.Add(1)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("copy", string(rune('0'+n))))
	if c := s.codes; c != nil && c[i] != codes.OK {
		return nil, status.Error(c[i], "scripted")
	}
	return &testgrpc.SimpleResponse{Username: string(rune('0' + n))}, nil
}

const hedgeConfig = `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`

// A backend whose first answer is slow and second fast: the hedged call
// returns at hedgingDelay + fast with the second copy's reply and header,
// and the slow copy is cancelled at the server.
func TestHedgingSlowFirstFastSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{time.Second, 10 * time.Millisecond}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		var header metadata.MD
		resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}, grpc.Header(&header))
		if err != nil || resp.GetUsername() != "2" {
			t.Fatalf("got %v, %v; want copy 2's reply", resp, err)
		}
		if d := time.Since(start); d != 60*time.Millisecond {
			t.Fatalf("took %v, want hedgingDelay + fast = 60ms", d)
		}
		if got := header.Get("copy"); len(got) != 1 || got[0] != "2" {
			t.Fatalf("header %v, want copy 2's", header)
		}
		synctest.Wait() // the cancellation reaches the server
		if s.n.Load() != 2 || s.cancelled.Load() != 1 || s.previous.Load() != "1" {
			t.Fatalf("server: %d calls, %d cancelled, previous attempts %v; want 2, 1, 1", s.n.Load(), s.cancelled.Load(), s.previous.Load())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held after the call", bh.Active())
		}
	})
}

// A fatal answer wins: the other copies are cancelled at once.
func TestHedgingFatalCodeStopsEveryCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{70 * time.Millisecond, time.Second, time.Second},
			codes: []codes.Code{codes.InvalidArgument, codes.OK, codes.OK}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.InvalidArgument || time.Since(start) != 70*time.Millisecond {
			t.Fatalf("got %v after %v; want the first copy's INVALID_ARGUMENT at 70ms", err, time.Since(start))
		}
		synctest.Wait()
		if s.n.Load() != 2 || s.cancelled.Load() != 1 {
			t.Fatalf("server: %d calls, %d cancelled; want 2 and 1", s.n.Load(), s.cancelled.Load())
		}
	})
}

// A non-fatal answer sends the next copy at once; when each copy fails so,
// the caller gets the last failure.
func TestHedgingNonFatalSendsTheNextCopyAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{10 * time.Millisecond}, codes: []codes.Code{codes.Unavailable}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || time.Since(start) != 30*time.Millisecond || s.n.Load() != 3 {
			t.Fatalf("got %v after %v with %d calls; want UNAVAILABLE after 3 × 10ms", err, time.Since(start), s.n.Load())
		}
	})
}

// No copy outlives the overall deadline, and every permit is back.
func TestHedgingNoCopyOutlivesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{time.Hour}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 200ms }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms }
`)
		defer stop()
		start := time.Now()
		_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || time.Since(start) != 200*time.Millisecond {
			t.Fatalf("got %v after %v; want DEADLINE_EXCEEDED at 200ms", err, time.Since(start))
		}
		synctest.Wait()
		if s.n.Load() != 3 || s.cancelled.Load() != 3 {
			t.Fatalf("server: %d calls, %d cancelled; want 3 and 3", s.n.Load(), s.cancelled.Load())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}

// Server pushback (gRFC A6) delays the next copy.
func TestHedgingPushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		var n atomic.Int32
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if n.Add(1) == 1 {
				_ = setTrailer(ctx, grpcmw.PushbackTrailer, "300")
				return nil, status.Error(codes.Unavailable, "busy")
			}
			return &testgrpc.SimpleResponse{}, nil
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("got %v after %v; want OK after the 300ms pushback", err, time.Since(start))
		}
	})
}

func TestHedgingConfig(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"with a written retry", "defaults: { retry: { maxAttempts: 3 }, hedging: { maxAttempts: 2 } }",
			"defaults.hedging: cannot be used with retry on the same method, and defaults.retry is enabled for it"},
		{"retry at defaults, hedging on a method", "defaults: { retry: { maxAttempts: 3 } }\nservices: { a.B: { methods: { Get: { hedging: {} } } } }",
			`services."a.B".methods.Get.hedging: cannot be used with retry on the same method, and defaults.retry is enabled for it`},
		{"attempts", "defaults: { hedging: { maxAttempts: 6 } }", "defaults.hedging.maxAttempts: must be in [2, 5]"},
		{"delay", "defaults: { hedging: { hedgingDelay: -1ms } }", "defaults.hedging.hedgingDelay: must not be negative"},
		{"OK non-fatal", "defaults: { hedging: { nonFatalStatusCodes: [OK] } }", "defaults.hedging.nonFatalStatusCodes: OK is not a failure"},
		{"unknown key", "defaults: { hedging: { delay: 1s } }", "defaults.hedging.delay: unknown key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcmw.ParseConfig([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
	for _, ok := range []string{
		"defaults: { hedging: {} }", // the built-in retry yields
		"defaults: { retry: { maxAttempts: 3 } }\nservices: { a.B: { methods: { Get: { retry: { enabled: false }, hedging: {} } } } }",
		"defaults: { retry: { maxAttempts: 3 }, hedging: { enabled: false } }",
	} {
		if _, err := grpcmw.ParseConfig([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A copy that its own attempt timeout ends got no answer: the copies in
// flight go on (and the next goes at once), instead of the timeout ending
// the call.
func TestHedgingAttemptTimeoutIsNotAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{time.Hour, 80 * time.Millisecond, time.Hour}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 100ms, overall: 0s }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms }
`)
		defer stop()
		start := time.Now()
		resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if err != nil || resp.GetUsername() != "2" || time.Since(start) != 130*time.Millisecond {
			t.Fatalf("got %v, %v after %v; want copy 2's answer at 130ms", resp, err, time.Since(start))
		}
		synctest.Wait()
		if s.n.Load() != 3 {
			t.Fatalf("%d copies, want 3 (the third sent when the first timed out)", s.n.Load())
		}
		cb, _ := chain.Breaker(testService)
		if m := cb.Metrics(); m.SuccessfulCalls != 1 || m.FailedCalls != 1 {
			t.Fatalf("breaker %+v: want copy 2's success and copy 1's timeout; copy 3, cancelled, is ignored", m)
		}
	})
}

// Retry throttling bounds hedging: once the client's tokens are at half or
// below, only first copies go.
func TestHedgingIsThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{delays: []time.Duration{time.Millisecond}, codes: []codes.Code{codes.Unavailable}}
		f := new(faultServer)
		f.setUnary(s.handler)
		client, _, stop := inBubble(t, f, `
retryThrottling: { maxTokens: 4, tokenRatio: 0.1 }
defaults:
  retry: { enabled: false }
  circuitBreaker: { enabled: false }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms }
`)
		defer stop()
		// Tokens 4 → 3 → 2 (at half: the third copy is held back).
		_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if s.n.Load() != 2 {
			t.Fatalf("first call: %d copies, want 2", s.n.Load())
		}
		for range 3 {
			_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		}
		if s.n.Load() != 5 {
			t.Fatalf("%d copies in all, want 5: throttled calls send their first copy only", s.n.Load())
		}
	})
}
