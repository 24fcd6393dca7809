package otelmw_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
)

// flakyServer fails the first UnaryCall with UNAVAILABLE and answers every
// other call.
type flakyServer struct {
	testgrpc.UnimplementedTestServiceServer
	unary atomic.Int32
}

func (s *flakyServer) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.unary.Add(1) == 1 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (s *flakyServer) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

// dialBufconn serves srv over bufconn and dials it through a grpcmw chain
// built from yamlConfig, plus extra dial options.
func dialBufconn(t *testing.T, srv testgrpc.TestServiceServer, yamlConfig string, chainOpts []grpcmw.Option, extra ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)

	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, chainOpts...)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chain.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient("passthrough:///bufnet", append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

const quickRetries = `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
`

// otelgrpc's stats handler beside otelmw on one client: the two scopes
// share no metric name, none of otelmw's is an rpc.* name, and otelgrpc
// counts attempts where meshless.call.duration counts logical calls.
func TestBesideOtelgrpcNoMetricNameCollides(t *testing.T) {
	mp, reader := newProvider(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

	client := dialBufconn(t, new(flakyServer), quickRetries, []grpcmw.Option{grpcmw.WithObserver(obs)},
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithMeterProvider(mp), otelgrpc.WithTracerProvider(tp))))

	ctx, span := tp.Tracer("test").Start(t.Context(), "checkout")
	if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil { // UNAVAILABLE, then OK
		t.Fatal(err)
	}
	span.End()

	all := scopes(t, reader)
	ours, theirs := all[otelmw.ScopeName], all[otelgrpc.ScopeName]
	if len(ours) == 0 || len(theirs) == 0 {
		t.Fatalf("scopes %v: want metrics from both otelmw and otelgrpc", keys(all))
	}
	for name := range ours {
		if _, both := theirs[name]; both {
			t.Errorf("%s is recorded by both otelmw and otelgrpc", name)
		}
		if !strings.HasPrefix(name, "meshless.") || strings.HasPrefix(name, "rpc.") {
			t.Errorf("otelmw records %s: want only meshless.* names", name)
		}
	}
	for name := range theirs {
		if !strings.HasPrefix(name, "rpc.") {
			t.Errorf("otelgrpc records %s, expected rpc.* only", name)
		}
	}

	// Two logical calls, three attempts.
	var logical, attempts uint64
	for _, h := range hists(t, ours["meshless.call.duration"]) {
		logical += h.Count
	}
	for _, m := range theirs {
		if m.Name == "rpc.client.duration" || m.Name == "rpc.client.call.duration" {
			for _, p := range histPoints(m) {
				attempts += p
			}
		}
	}
	if logical != 2 || attempts != 3 {
		t.Errorf("meshless.call.duration counted %d calls, otelgrpc %d attempts; want 2 and 3", logical, attempts)
	}
	unary := enc(attribute.String("rpc.method", "grpc.testing.TestService/UnaryCall"),
		attribute.String("meshless.retry.outcome", "success_with_retry"))
	if got := values(t, ours["meshless.retry.calls"])[unary]; got != 1 {
		t.Errorf("meshless.retry.calls{%s} = %v, want 1", unary, got)
	}

	// The retry is an event on the caller's span, with the gRPC code.
	var found bool
	for _, s := range spans.Ended() {
		if s.Name() != "checkout" {
			continue
		}
		for _, e := range s.Events() {
			if e.Name != "meshless.retry" {
				continue
			}
			found = true
			got := attribute.NewSet(e.Attributes...)
			want := attribute.NewSet(
				attribute.Int("meshless.retry.attempt", 2),
				attribute.Float64("meshless.retry.backoff", 0.001),
				attribute.String("rpc.method", "grpc.testing.TestService/UnaryCall"),
				attribute.String("error.type", "UNAVAILABLE"),
				attribute.String("rpc.response.status_code", "UNAVAILABLE"),
			)
			if !got.Equals(&want) {
				t.Errorf("retry event %v, want %v", got.Encoded(attribute.DefaultEncoder()), want.Encoded(attribute.DefaultEncoder()))
			}
		}
	}
	if !found {
		t.Error("no meshless.retry event on the caller's span")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
