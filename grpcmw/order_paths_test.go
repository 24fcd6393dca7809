package grpcmw_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// everyKind answers every kind of call at once: one response, or one per
// request.
type everyKind struct {
	testgrpc.UnimplementedTestServiceServer
}

func (everyKind) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{}, nil
}

func (everyKind) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
	return s.Send(&testgrpc.StreamingOutputCallResponse{})
}

func (everyKind) StreamingInputCall(s testgrpc.TestService_StreamingInputCallServer) error {
	for {
		if _, err := s.Recv(); err == io.EOF {
			return s.SendAndClose(&testgrpc.StreamingInputCallResponse{})
		} else if err != nil {
			return err
		}
	}
}

func (everyKind) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	for {
		if _, err := s.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// calls makes one call of each kind and checks that it succeeded.
var callKinds = []struct {
	name string
	call func(ctx context.Context, c testgrpc.TestServiceClient) error
}{
	{"unary", func(ctx context.Context, c testgrpc.TestServiceClient) error {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return err
	}},
	{"server streaming", func(ctx context.Context, c testgrpc.TestServiceClient) error {
		s, err := c.StreamingOutputCall(ctx, sendParams(1))
		if err != nil {
			return err
		}
		_, err = recvAll(s)
		return err
	}},
	{"client streaming", func(ctx context.Context, c testgrpc.TestServiceClient) error {
		s, err := c.StreamingInputCall(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&testgrpc.StreamingInputCallRequest{}); err != nil {
			return err
		}
		_, err = s.CloseAndRecv()
		return err
	}},
	{"bidi streaming", func(ctx context.Context, c testgrpc.TestServiceClient) error {
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{}); err != nil {
			return err
		}
		if _, err := s.Recv(); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		if _, err := s.Recv(); err != io.EOF {
			return err
		}
		return nil
	}},
}

// Issue 20: the order is written once, and every kind of call runs through
// every stage of it — the overall timeout, the attempt policy, the breaker,
// the rate limiter, the bulkhead, the attempt timeout and the per-call
// event — in the same order (docs/order.md). Before the engine, a stream's
// overall timeout reported no event and streams recorded no call event.
func TestEveryPathRunsEveryStageInOrder(t *testing.T) {
	const timeouts = "{ timeout: { perAttempt: 10s, overall: 20s } }"
	methods := "\n    methods: { UnaryCall: " + timeouts + ", StreamingOutputCall: " + timeouts +
		", StreamingInputCall: " + timeouts + ", FullDuplexCall: " + timeouts + " }\n"
	attempt := []string{"rate_limiter:acquired", "throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call"}
	end := []string{"timeout/overall:call", "call:call"}
	retried := slices.Concat(attempt, []string{"retry:attempt", "retry:retry_done"}, end)
	hedged := slices.Concat(attempt, []string{"hedging:hedge_done"}, end)
	// A hedged stream commits its copy at the first response: the hedge is
	// over before the copy's gates exit, when the stream ends.
	hedgedStream := slices.Concat(attempt[:3], []string{"hedging:hedge_done"}, attempt[3:], end)
	tests := []struct {
		name string
		yaml string
		want map[string][]string // by kind of call
	}{
		{
			name: "retry",
			yaml: "defaults:\n  rateLimiter: { limitForPeriod: 1000 }\nservices:\n  grpc.testing.TestService:" + methods,
			want: map[string][]string{"unary": retried, "server streaming": retried, "client streaming": retried, "bidi streaming": retried},
		},
		{
			name: "hedging",
			yaml: "defaults:\n  rateLimiter: { limitForPeriod: 1000 }\n  retry: { enabled: false }\n  hedging: { maxAttempts: 2, hedgingDelay: 10s }\nservices:\n  grpc.testing.TestService:" + methods,
			// Client and bidi streams cannot be hedged: they are retried.
			want: map[string][]string{"unary": hedged, "server streaming": hedgedStream, "client streaming": retried, "bidi streaming": retried},
		},
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, everyKind{})
	addr := serveOn(t, srv)
	for _, tt := range tests {
		for _, kind := range callKinds {
			t.Run(tt.name+"/"+kind.name, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				client, _, _ := dial(t, addr, tt.yaml, grpcmw.WithObserver(obs))
				if err := kind.call(t.Context(), client); err != nil {
					t.Fatalf("call: %v", err)
				}
				if got, want := obs.Trace(), tt.want[kind.name]; !slices.Equal(got, want) {
					t.Fatalf("events:\n%v\nwant:\n%v", got, want)
				}
			})
		}
	}
}

// The server's paths run the server's gates (rate limiter, bulkhead) in the
// same order, unary and streaming alike.
func TestEveryServerPathRunsItsGatesInOrder(t *testing.T) {
	obs := new(resiliencetest.Observer)
	cfg, err := grpcmw.ParseConfig([]byte(`defaults: { rateLimiter: { limitForPeriod: 1000 }, bulkhead: { maxConcurrentCalls: 2 } }`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := grpcmw.NewServer(cfg, grpcmw.WithServerObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := grpc.NewServer(s.ServerOptions()...)
	testgrpc.RegisterTestServiceServer(srv, everyKind{})
	addr := serveOn(t, srv)
	client, _, _ := dial(t, addr, `defaults: { retry: { enabled: false } }`)
	for _, kind := range callKinds {
		t.Run(kind.name, func(t *testing.T) {
			before := len(obs.Trace())
			if err := kind.call(t.Context(), client); err != nil {
				t.Fatalf("call: %v", err)
			}
			want := []string{"rate_limiter:acquired", "bulkhead:acquired", "bulkhead:released"}
			if got := obs.Trace()[before:]; !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
		})
	}
}

// serveOn serves srv on loopback TCP until the test ends.
func serveOn(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// flakyDuplex fails its first bidi stream with UNAVAILABLE before any
// response, then echoes.
type flakyDuplex struct {
	everyKind
	calls atomic.Int32
}

func (f *flakyDuplex) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	if f.calls.Add(1) == 1 {
		return status.Error(codes.Unavailable, "once")
	}
	return f.everyKind.FullDuplexCall(s)
}

// Issue 20: a hedging method's bidi (and client-streaming) calls cannot be
// hedged; they are retried with the hedging policy's attempts and non-fatal
// codes (before the engine they got no retry and no budget counting).
func TestAHedgingMethodsBidiStreamIsRetried(t *testing.T) {
	f := new(flakyDuplex)
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, f)
	addr := serveOn(t, srv)
	client, chain, _ := dial(t, addr, "defaults:\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 1ms }\n")
	before := chain.Throttle().Tokens()
	if err := callKinds[3].call(t.Context(), client); err != nil {
		t.Fatalf("the bidi call failed: %v", err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("%d attempts reached the server, want 2 (the failure retried)", n)
	}
	if after := chain.Throttle().Tokens(); after >= before {
		t.Fatalf("retry budget tokens %v -> %v: the failure was not counted", before, after)
	}
}
