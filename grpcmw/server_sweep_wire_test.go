package grpcmw_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A shedding server's rejections, over the wire, to a meshless client
// whose retry policy lists RESOURCE_EXHAUSTED: each gate (bulkhead,
// rate limiter), unary and server-streaming. The client gets the reason,
// makes one attempt, and the server's handler never runs for it; a
// business answer (NOT_FOUND) reaches the client unmarked.
func TestASheddingServerOverTheWire(t *testing.T) {
	const client = "defaults: { retry: { maxAttempts: 3, retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] } }\n"
	for _, g := range []struct{ name, yaml, reason string }{
		{"bulkhead", "defaults: { bulkhead: { maxConcurrentCalls: 1 } }", "BULKHEAD_FULL"},
		{"ratelimiter", "defaults: { bulkhead: { maxConcurrentCalls: 100 }, rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 1h } }", "RATE_LIMITED"},
	} {
		for _, stream := range []bool{false, true} {
			name := g.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg, err := grpcmw.ParseConfig([]byte(g.yaml))
					if err != nil {
						t.Fatal(err)
					}
					shed, err := grpcmw.NewServer(cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer shed.Close()
					f := new(faultServer)
					release := make(chan struct{})
					var holding atomic.Bool
					f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
						if holding.CompareAndSwap(false, true) {
							<-release
							return &testgrpc.SimpleResponse{}, nil
						}
						return nil, status.Error(codes.NotFound, "no")
					})
					f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
						if holding.CompareAndSwap(false, true) {
							<-release
							return nil
						}
						return status.Error(codes.NotFound, "no")
					})
					var attempts atomic.Int32
					count := []grpc.DialOption{
						grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
							attempts.Add(1)
							return invoker(ctx, method, req, reply, cc, opts...)
						}),
						grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
							attempts.Add(1)
							return streamer(ctx, desc, cc, method, opts...)
						}),
					}
					c, _, stop := inBubbleOf(t, f, client, nil, count, shed.ServerOptions()...)
					defer stop()
					call := func() error {
						if !stream {
							_, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
							return err
						}
						s, err := c.StreamingOutputCall(context.Background(), sendParams(1))
						if err != nil {
							return err
						}
						for {
							if _, err := s.Recv(); err != nil {
								if err == io.EOF {
									return nil
								}
								return err
							}
						}
					}
					held := make(chan error, 1)
					go func() { held <- call() }()
					synctest.Wait()
					if g.reason == "RATE_LIMITED" {
						if err := call(); status.Code(err) != codes.NotFound || sweepReason(err) != "" {
							t.Errorf("a business answer = %v (reason %q)", err, sweepReason(err))
						}
					}
					calls := f.calls.Load()
					before := attempts.Load()
					err = call()
					if status.Code(err) != codes.ResourceExhausted || sweepReason(err) != g.reason {
						t.Errorf("shed call = %v (reason %q), want %s", err, sweepReason(err), g.reason)
					}
					if n := attempts.Load() - before; n != 1 {
						t.Errorf("%d attempts for a shed call, want 1", n)
					}
					if n := f.calls.Load() - calls; n != 0 {
						t.Errorf("the handler ran %d times for a shed call", n)
					}
					close(release)
					if err := <-held; err != nil {
						t.Errorf("the holding call = %v", err)
					}
					synctest.Wait()
					if b, ok := shed.Bulkhead("grpc.testing.TestService"); !ok || b.Active() != 0 {
						t.Errorf("server bulkhead %v, permits held", ok)
					}
				})
			})
		}
	}
}
