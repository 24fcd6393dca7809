package grpcmw_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/otelmw"
)

// observed runs a chain in a synctest bubble over memnet with otelmw on an
// SDK reader, and returns the client, the chain, the metric values by
// series and a stop to call before the bubble's function returns.
func observed(t *testing.T, f *faultServer, yamlConfig string) (testgrpc.TestServiceClient, *grpcmw.Chain, func() map[string]int64, func()) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	lis := memnet.Listen()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///mem",
		append(chain.DialOptions(),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	metrics := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok {
					continue
				}
				for _, dp := range sum.DataPoints {
					key := m.Name
					keys := []string{"meshless.policy.kind", "meshless.observe.action", "meshless.timeout.kind", "meshless.circuit_breaker.outcome",
						"meshless.bulkhead.outcome", "meshless.rate_limiter.outcome", "meshless.throttler.outcome", "meshless.timeout.outcome"}
					if m.Name == "meshless.observe.decisions" {
						keys = keys[:2]
					}
					for _, k := range keys {
						if v, ok := dp.Attributes.Value(attribute.Key(k)); ok {
							key += " " + v.Emit()
						}
					}
					out[key] += dp.Value
				}
			}
		}
		return out
	}
	return testgrpc.NewTestServiceClient(conn), chain, metrics, func() {
		_ = conn.Close()
		srv.Stop()
		chain.Close()
		_ = obs.Close()
		_ = mp.Shutdown(context.Background())
	}
}

// Issue 19 item 5: in observe mode every policy decides and reports as
// usual, and none acts: every call reaches the server and its caller gets
// the server's answer, never a meshless rejection, and each policy's
// would-be action is counted in meshless.observe.decisions — not in the
// policy's own rejected or timed_out series, which keep counting only what
// was done.
func TestObserveModePassesEveryCallAndRecordsTheDecision(t *testing.T) {
	const base = "defaults:\n  mode: observe\n"
	tests := []struct {
		name  string
		yaml  string
		setup func(f *faultServer)
		calls int
		// concurrent calls are made at once and held at the server until
		// they have all arrived.
		concurrent bool
		wantCode   codes.Code
		// decisions are the would-be actions counted, by "kind action";
		// done are series that must stay at 0 (nothing was done).
		decisions map[string]int64
		done      []string
		check     func(t *testing.T, chain *grpcmw.Chain)
	}{
		{
			name:  "circuit breaker",
			yaml:  base + "  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }\n  retry: { enabled: false }\n  adaptiveThrottling: { enabled: false }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			calls: 10, wantCode: codes.Unavailable,
			decisions: map[string]int64{"circuit_breaker reject": 6},
			done:      []string{"meshless.circuit_breaker.calls rejected"},
			check: func(t *testing.T, chain *grpcmw.Chain) {
				if cb, _ := chain.Breaker(testService); cb.State() != circuitbreaker.StateOpen {
					t.Errorf("the breaker is %v: it must still decide (open) in observe mode", cb.State())
				}
			},
		},
		{
			name:  "rate limiter",
			yaml:  base + "  rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h, timeoutDuration: 1s }\n",
			calls: 5, wantCode: codes.OK,
			decisions: map[string]int64{"rate_limiter reject": 3},
			done:      []string{"meshless.rate_limiter.calls rejected"},
		},
		{
			name:  "adaptive throttler",
			yaml:  base + "  circuitBreaker: { enabled: false }\n  retry: { enabled: false }\n  adaptiveThrottling: { minimumRequests: 5 }\n",
			setup: func(f *faultServer) { f.setUnary(failing(codes.Unavailable)) },
			calls: 100, wantCode: codes.Unavailable,
			decisions: map[string]int64{"throttler reject": -1}, // some, drawn at random
			done:      []string{"meshless.throttler.calls rejected"},
		},
		{
			name:  "bulkhead",
			yaml:  base + "  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 1s }\n",
			calls: 3, concurrent: true, wantCode: codes.OK,
			decisions: map[string]int64{"bulkhead reject": 2},
			done:      []string{"meshless.bulkhead.calls rejected"},
		},
		{
			name: "retry",
			yaml: base,
			setup: func(f *faultServer) {
				var n atomic.Int32
				f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if n.Add(1) == 1 {
						return nil, status.Error(codes.Unavailable, "once")
					}
					return &testgrpc.SimpleResponse{}, nil
				})
			},
			calls: 1, wantCode: codes.Unavailable,
			decisions: map[string]int64{"retry retry": 1},
		},
		{
			name:  "hedging",
			yaml:  base + "  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\n",
			setup: func(f *faultServer) { f.setUnary(slow(50 * time.Millisecond)) },
			calls: 1, wantCode: codes.OK,
			decisions: map[string]int64{"hedging hedge": 1},
		},
		{
			name:  "timeouts",
			yaml:  base + "  timeout: { perAttempt: 10ms, overall: 20ms }\n",
			setup: func(f *faultServer) { f.setUnary(slow(50 * time.Millisecond)) },
			calls: 1, wantCode: codes.OK,
			decisions: map[string]int64{"timeout time_out": 2},
			done:      []string{"meshless.timeout.calls attempt timed_out", "meshless.timeout.calls overall timed_out"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				if tt.setup != nil {
					tt.setup(f)
				}
				release := make(chan struct{})
				if tt.concurrent {
					f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
						<-release
						return &testgrpc.SimpleResponse{}, nil
					})
				}
				client, chain, metrics, stop := observed(t, f, tt.yaml)
				defer stop()
				errs := make(chan error, tt.calls)
				call := func() {
					_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
					errs <- err
				}
				for range tt.calls {
					if tt.concurrent {
						go call()
					} else {
						call()
					}
				}
				if tt.concurrent {
					synctest.Wait() // every call is held at the server, or was refused
					if n := f.calls.Load(); n != int32(tt.calls) {
						t.Errorf("%d calls at the server at once, want %d", n, tt.calls)
					}
					close(release)
				}
				for range tt.calls {
					err := <-errs
					if status.Code(err) != tt.wantCode || grpcmw.RejectionReason(err) != "" {
						t.Fatalf("a caller got %v (reason %q), want the server's %v", err, grpcmw.RejectionReason(err), tt.wantCode)
					}
				}
				if n := f.calls.Load(); n != int32(tt.calls) {
					t.Errorf("%d calls reached the server, want every one of %d", n, tt.calls)
				}
				got := metrics()
				for d, want := range tt.decisions {
					n := got["meshless.observe.decisions "+d]
					if want < 0 && n == 0 || want >= 0 && n != want {
						t.Errorf("meshless.observe.decisions %s = %d, want %d (-1: some); all: %v", d, n, want, got)
					}
				}
				for _, series := range tt.done {
					if n := got[series]; n != 0 {
						t.Errorf("%s = %d: observe mode counted a would-be action as done", series, n)
					}
				}
				if tt.check != nil {
					tt.check(t, chain)
				}
			})
		})
	}
}

// slow answers OK after d (of the bubble's time), or the end of its
// context.
func slow(d time.Duration) func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		select {
		case <-time.After(d):
			return &testgrpc.SimpleResponse{}, nil
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// Observe mode per method: two methods share the service's breaker; the one
// that observes passes through it while it is open, and its rejections are
// counted as would-be; the one that enforces is rejected.
func TestObserveModePerMethod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setUnary(failing(codes.Unavailable))
		client, _, metrics, stop := observed(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }
  retry: { enabled: false }
services:
  grpc.testing.TestService:
    methods:
      UnaryCall: { mode: observe }
`)
		defer stop()
		for range 6 {
			if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); status.Code(err) != codes.Unavailable || grpcmw.RejectionReason(err) != "" {
				t.Fatalf("the observing method got %v, want the server's UNAVAILABLE", err)
			}
		}
		if _, err := client.EmptyCall(context.Background(), &testgrpc.Empty{}); grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
			t.Fatalf("the enforcing method got %v, want CIRCUIT_OPEN from the shared breaker", err)
		}
		got := metrics()
		if got["meshless.observe.decisions circuit_breaker reject"] != 2 || got["meshless.circuit_breaker.calls rejected"] != 1 {
			t.Fatalf("would-be rejections %d (want 2), real ones %d (want 1): %v", got["meshless.observe.decisions circuit_breaker reject"], got["meshless.circuit_breaker.calls rejected"], got)
		}
	})
}
