package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/test/bufconn"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
)

// echo is the server: it answers every UnaryCall at once.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, nil
}

func startServer(b *testing.B, lis net.Listener) {
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, echo{})
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
}

// The default configuration (docs/configuration.md): breaker, retry, bulkhead, both
// timeouts, retry throttling.
func newChain(b *testing.B) *grpcmw.Chain {
	chain, err := grpcmw.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	return chain
}

// chainOf returns the chain of a YAML configuration, closed when b ends.
func chainOf(b *testing.B, yaml string) *grpcmw.Chain {
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(chain.Close)
	return chain
}

func benchClient(b *testing.B, conn *grpc.ClientConn) {
	client := testgrpc.NewTestServiceClient(conn)
	req := &testgrpc.SimpleRequest{}
	ctx := context.Background()
	if _, err := client.UnaryCall(ctx, req); err != nil { // connect, resolve the method
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// B5: a unary call over loopback TCP, with and without the chain, same run.
func BenchmarkGRPCUnaryTCP(b *testing.B) {
	dial := loopback(b)
	b.Run("bare", func(b *testing.B) { benchClient(b, dial(b)) })
	b.Run("meshless", func(b *testing.B) { benchClient(b, dial(b, newChain(b).DialOptions()...)) })
	b.Run("bare-per-call-timeout", func(b *testing.B) {
		// A careful client without meshless: a 1s timeout on every call, as
		// meshless's default per-attempt timeout sets.
		client := testgrpc.NewTestServiceClient(dial(b))
		req := &testgrpc.SimpleRequest{}
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := client.UnaryCall(ctx, req); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("meshless-otelmw", func(b *testing.B) {
		// The default configuration with otelmw recording every event into
		// the OpenTelemetry SDK.
		chain, err := grpcmw.New(nil, grpcmw.WithObserver(sdkObserver(b)))
		if err != nil {
			b.Fatal(err)
		}
		benchClient(b, dial(b, chain.DialOptions()...))
	})
	b.Run("meshless-no-timeouts", func(b *testing.B) {
		cfg, _ := grpcmw.ParseConfig([]byte("defaults: { timeout: { enabled: false } }"))
		chain, _ := grpcmw.New(cfg)
		benchClient(b, dial(b, chain.DialOptions()...))
	})
	b.Run("bare-caller-deadline", func(b *testing.B) {
		conn := dial(b)
		client := testgrpc.NewTestServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req := &testgrpc.SimpleRequest{}
		_, _ = client.UnaryCall(ctx, req)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.UnaryCall(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("meshless-caller-deadline", func(b *testing.B) {
		// The caller's deadline (passed on by a server, say) comes before
		// the timeouts: they derive nothing.
		cfg, _ := grpcmw.ParseConfig([]byte("defaults: { timeout: { perAttempt: 2h, overall: 3h } }"))
		chain, _ := grpcmw.New(cfg)
		conn := dial(b, chain.DialOptions()...)
		client := testgrpc.NewTestServiceClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req := &testgrpc.SimpleRequest{}
		_, _ = client.UnaryCall(ctx, req)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := client.UnaryCall(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sdkObserver returns otelmw on the OpenTelemetry SDK, with a manual
// reader, both closed when the benchmark ends.
func sdkObserver(b *testing.B) *otelmw.Observer {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := otelmw.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = obs.Close() })
	return obs
}

// loopback starts the server on a loopback TCP port and returns how to dial
// it: a new connection each time, closed when the benchmark that dialled it
// ends.
func loopback(b *testing.B) func(b *testing.B, opts ...grpc.DialOption) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	startServer(b, lis)
	return func(b *testing.B, opts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return conn
	}
}

// The interceptor's own cost: a unary call over bufconn (no network), with
// and without the chain.
func BenchmarkGRPCUnaryBufconn(b *testing.B) {
	lis := bufconn.Listen(1 << 20)
	startServer(b, lis)
	dial := func(b *testing.B, opts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient("passthrough:///bufnet", append(opts,
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	b.Run("bare", func(b *testing.B) { benchClient(b, dial(b)) })
	b.Run("meshless", func(b *testing.B) { benchClient(b, dial(b, newChain(b).DialOptions()...)) })
}

// The interceptor alone around an invoker that does nothing: what meshless
// adds to a call, without gRPC's own cost.
func BenchmarkGRPCInterceptorOnly(b *testing.B) {
	noop := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.Run("defaults", func(b *testing.B) {
		icpt := newChain(b).UnaryClientInterceptor()
		b.ReportAllocs()
		for b.Loop() {
			_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
		}
	})
	b.Run("defaults-without-adaptive-throttling", func(b *testing.B) {
		cfg, _ := grpcmw.ParseConfig([]byte("defaults: { adaptiveThrottling: { enabled: false } }"))
		chain, _ := grpcmw.New(cfg)
		icpt := chain.UnaryClientInterceptor()
		b.ReportAllocs()
		for b.Loop() {
			_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
		}
	})
	b.Run("no-timeouts", func(b *testing.B) {
		cfg, _ := grpcmw.ParseConfig([]byte("defaults: { timeout: { enabled: false } }"))
		chain, _ := grpcmw.New(cfg)
		icpt := chain.UnaryClientInterceptor()
		b.ReportAllocs()
		for b.Loop() {
			_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
		}
	})
	// A method whose retries are off, with retry throttling on (the
	// default): it still reads the pushback trailer, for the throttle
	// (gRFC A6 counts every RPC).
	b.Run("no-timeouts-no-retries", func(b *testing.B) {
		cfg, _ := grpcmw.ParseConfig([]byte("defaults: { timeout: { enabled: false }, retry: { enabled: false } }"))
		chain, _ := grpcmw.New(cfg)
		icpt := chain.UnaryClientInterceptor()
		b.ReportAllocs()
		for b.Loop() {
			_ = icpt(ctx, "/grpc.testing.TestService/UnaryCall", nil, nil, nil, noop)
		}
	})
}
