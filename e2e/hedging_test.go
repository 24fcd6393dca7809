package e2e

// This file runs, inside the test, a second meshless client for Prometheus
// to scrape beside examples/chaos: one that hedges its calls and whose
// bulkhead queues, the two things the demo does not do, and that calls one
// method in observe mode. It fills the Hedging row, the Bulkhead wait panel
// and the observe-mode panel, and the recording rules on them.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
)

// hedgingYAML is the second client's configuration. Its service and method
// are the demo's (grpc.testing.TestService/UnaryCall), so the dashboard's
// breaker and method variables select both clients with one value. One call
// in three is slow (slowCall): the hedge sent after hedgingDelay wins it.
// Two attempts at once, waiting up to 20ms for a third: copies queue.
const hedgingYAML = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  hedging:
    maxAttempts: 2
    hedgingDelay: 10ms
  bulkhead:
    maxConcurrentCalls: 2
    maxWaitDuration: 20ms
  timeout:
    perAttempt: 500ms
`

// observeYAML is a third client's, in the same process: observe mode, with
// a rate limit of 1 call a second that lets every call through and counts
// the ones it would have rejected (the observe-mode panel).
const observeYAML = `
defaults:
  mode: observe
  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1s }
`

// slowCall is how long the backend takes over one call in three.
const slowCall = 60 * time.Millisecond

// slowBackend answers every call OK, one in three after slowCall (or when
// the copy is cancelled: a hedge won).
type slowBackend struct {
	testgrpc.UnimplementedTestServiceServer
	calls atomic.Int64
}

func (b *slowBackend) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if b.calls.Add(1)%3 == 0 {
		t := time.NewTimer(slowCall)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &testgrpc.SimpleResponse{}, nil
}

// startHedgingClient starts the backend, the hedging client calling it from
// two workers about 20 times a second each (light: the demo beside it is
// sensitive to a busy CPU), and a /metrics server of the
// client's meshless metrics. It returns that server's host:port. Everything
// stops when the test ends.
func startHedgingClient(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &slowBackend{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(lis) //nolint:errcheck // returns once Stop is called
	}()
	t.Cleanup(func() { srv.Stop(); <-served })

	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { mp.Shutdown(context.Background()) }) //nolint:errcheck // nothing to flush
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Close() }) //nolint:errcheck // idempotent, nothing to report
	// The HTTP row's calls, on the same /metrics.
	startHTTPClient(t, obs)

	cfg, err := grpcmw.ParseConfig([]byte(hedgingYAML))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	conn, err := grpc.NewClient(lis.Addr().String(), append(chain.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) //nolint:errcheck // closing a client conn reports nothing useful
	observing := dialWith(t, lis.Addr().String(), observeYAML, obs)

	ctx, cancel := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	t.Cleanup(func() { cancel(); workers.Wait() })
	stub := testgrpc.NewTestServiceClient(conn)
	for range 2 {
		workers.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond) // pacing the load, not waiting for a state
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				// Errors are the point (BULKHEAD_FULL shows on the dashboard).
				stub.UnaryCall(ctx, &testgrpc.SimpleRequest{}) //nolint:errcheck
				observing.EmptyCall(ctx, &testgrpc.Empty{})    //nolint:errcheck
			}
		})
	}

	mlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	hsDone := make(chan struct{})
	go func() {
		defer close(hsDone)
		if err := hs.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("the hedging client's /metrics: %v", err)
		}
	}()
	t.Cleanup(func() { hs.Close(); <-hsDone }) //nolint:errcheck // Close's error is the listener's
	return mlis.Addr().String()
}

// dialWith connects to addr through a chain built from yamlConfig that
// reports to obs; everything closes when the test ends.
func dialWith(t *testing.T, addr, yamlConfig string, obs *otelmw.Observer) testgrpc.TestServiceClient {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	conn, err := grpc.NewClient(addr, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) //nolint:errcheck // closing a client conn reports nothing useful
	return testgrpc.NewTestServiceClient(conn)
}
