package otelmw_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/ctxtest"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/resilience"
)

// inBubble serves srv over memnet (inside the test's synctest bubble) and
// dials it through a grpcmw chain built from yamlConfig; stop closes all.
func inBubble(t *testing.T, srv testgrpc.TestServiceServer, yamlConfig string, opts ...grpcmw.Option) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	lis := memnet.Listen()
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///mem", append(chain.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	return testgrpc.NewTestServiceClient(conn), chain, func() {
		_ = conn.Close()
		s.Stop()
		chain.Close()
	}
}

// heldServer holds its first UnaryCall until release closes, and answers
// every call.
type heldServer struct {
	testgrpc.UnimplementedTestServiceServer
	arrived atomic.Int64
	release chan struct{}
}

func (s *heldServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.arrived.Add(1) == 1 {
		<-s.release
	}
	return &testgrpc.SimpleResponse{}, nil
}

type recordFunc func(ctx context.Context, e resilience.Event)

func (f recordFunc) Record(ctx context.Context, e resilience.Event) { f(ctx, e) }

// A call that waited in the bulkhead's or the rate limiter's queue and was
// admitted as its deadline passed is not attempted (3136ed5): the server
// never sees it. In the catalogue (docs/metrics.md, "A call admitted as its
// deadline passed") it is one failed logical call (DEADLINE_EXCEEDED),
// admitted by its gates, the bulkhead's permit back (call.active at 0), ignored by the
// breaker (never a failure), and one attempt of a failed retry call, as a
// call the bulkhead refused when its caller's context ended in the queue;
// no span event: nothing was retried or refused.
func TestACallAdmittedAsItsDeadlinePassedInTheCatalogue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue resilience.Kind // the gate that makes the call wait
		yaml  string
	}{
		{"bulkhead", resilience.KindBulkhead, "  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 5s }\n"},
		{"rate limiter", resilience.KindRateLimiter, "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1s, timeoutDuration: 5s }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { admittedAsItsDeadlinePassed(t, tc.queue, tc.yaml) })
	}
}

func admittedAsItsDeadlinePassed(t *testing.T, queue resilience.Kind, yaml string) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader := newObserver(t)
		srv := &heldServer{release: make(chan struct{})}
		waiter := ctxtest.NewEnding()
		var armed atomic.Bool
		// The waiter's deadline passes once the queue's gate handed it the
		// permit, on its own goroutine, before its attempt.
		hook := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			if src.Kind != queue {
				return nil
			}
			return recordFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventAcquired && armed.CompareAndSwap(true, false) {
					waiter.End()
				}
			})
		})
		client, _, stop := inBubble(t, srv, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 0s }
  retry: { maxAttempts: 3, initialBackoff: 1s, jitter: 0, retryableStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }
`+yaml, grpcmw.WithObserver(resilience.Observers(obs, hook)))
		defer stop()
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		defer tp.Shutdown(context.Background()) //nolint:errcheck
		held := make(chan error, 1)
		go func() { _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); held <- err }()
		synctest.Wait() // the first call holds the only permit (of the period)
		armed.Store(true)
		got := make(chan error, 1)
		ctx, span := tp.Tracer("test").Start(waiter, "waiter")
		go func() { _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); got <- err }()
		synctest.Wait() // the second waits for it
		close(srv.release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		err := <-got
		span.End()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("got %v, want DEADLINE_EXCEEDED", err)
		}
		if n := srv.arrived.Load(); n != 1 {
			t.Fatalf("the server saw %d calls, want 1", n)
		}
		const svc, m = "grpc.testing.TestService", "grpc.testing.TestService/UnaryCall"
		ms := collect(t, reader)
		sameValues(t, "meshless.circuit_breaker.calls", values(t, ms["meshless.circuit_breaker.calls"]), map[string]float64{
			breakerCall(svc, "success", false): 1,
			breakerCall(svc, "ignored", false): 1,
		})
		sameValues(t, "meshless.bulkhead.calls", values(t, ms["meshless.bulkhead.calls"]), map[string]float64{
			enc(bulkheadName(svc), attribute.String("meshless.bulkhead.outcome", "admitted")): 2,
		})
		if queue == resilience.KindRateLimiter {
			sameValues(t, "meshless.rate_limiter.calls", values(t, ms["meshless.rate_limiter.calls"]), map[string]float64{
				enc(attribute.String("meshless.rate_limiter.name", svc), attribute.String("meshless.rate_limiter.outcome", "permitted")): 2,
			})
		}
		sameValues(t, "meshless.bulkhead.call.active", values(t, ms["meshless.bulkhead.call.active"]), map[string]float64{
			enc(bulkheadName(svc)): 0,
		})
		sameValues(t, "meshless.retry.attempts", values(t, ms["meshless.retry.attempts"]), map[string]float64{
			enc(method(m)): 2,
		})
		sameValues(t, "meshless.retry.calls", values(t, ms["meshless.retry.calls"]), map[string]float64{
			enc(method(m), attribute.String("meshless.retry.outcome", "success_without_retry")): 1,
			enc(method(m), attribute.String("meshless.retry.outcome", "failed_without_retry")):  1,
		})
		calls := hists(t, ms["meshless.call.duration"])
		grpcAttrs := []attribute.KeyValue{attribute.String("rpc.system.name", "grpc"), method(m)}
		for k, n := range map[string]uint64{
			enc(grpcAttrs...): 1,
			enc(append(grpcAttrs, attribute.String("error.type", "DEADLINE_EXCEEDED"))...): 1,
		} {
			if calls[k].Count != n {
				t.Errorf("meshless.call.duration{%s}: %d calls, want %d", k, calls[k].Count, n)
			}
		}
		if len(calls) != 2 {
			t.Errorf("meshless.call.duration: %d series, want 2", len(calls))
		}
		for _, s := range sr.Ended() {
			for _, e := range s.Events() {
				t.Errorf("span %s: event %s %v; want none", s.Name(), e.Name, e.Attributes)
			}
		}
	})
}

// codeServer answers each UnaryCall with the next of its codes.
type codeServer struct {
	testgrpc.UnimplementedTestServiceServer
	codes []codes.Code
	n     atomic.Int64
}

func (s *codeServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return nil, status.Error(s.codes[s.n.Add(1)-1], "answer")
}

// A gRPC server may send any number as grpc-status. One sending 100–599
// (an HTTP status written as a gRPC code by a broken proxy, or a hostile
// server) had each recorded as an error.type value of its own ("503"),
// while 17 and up were _OTHER: 32 such answers spent the method's bound, and
// its real UNAVAILABLE failures were then recorded as _OTHER. A code gRPC
// does not define is _OTHER whatever its number, as docs/metrics.md says.
func TestAGRPCCodeThatLooksLikeAnHTTPStatusDoesNotSpendTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs, reader := newObserver(t)
		srv := &codeServer{}
		for c := range 32 {
			srv.codes = append(srv.codes, codes.Code(500+c))
		}
		srv.codes = append(srv.codes, 17, 999, codes.Unavailable)
		client, _, stop := inBubble(t, srv, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
`, grpcmw.WithObserver(obs))
		defer stop()
		for range srv.codes {
			_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		}
		got := errorTypesOf(t, collect(t, reader)["meshless.call.duration"])
		if !got["UNAVAILABLE"] {
			t.Errorf("UNAVAILABLE recorded as _OTHER after codes 500-531 from the wire")
		}
		for et := range got {
			if et != "UNAVAILABLE" && et != "_OTHER" {
				t.Errorf("error.type %q: a code gRPC does not define has a value of its own", et)
			}
		}
	})
}
