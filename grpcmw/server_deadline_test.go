package grpcmw_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// A call waiting in the server bulkhead's queue (maxWaitDuration 10s) whose
// own context ends gives up then, without running the handler, and ends
// with its context's status, as grpc-go ends a call whose deadline passed:
// the call was not shed, its caller gave up. The deadline is the server's
// own (an outer interceptor's 1s, the client's 5s): DEADLINE_EXCEEDED; or
// the client's grpc-timeout (1s), whose passing the server may hear first
// as its own timer or as the client's cancel (both fire at the same fake
// instant): the server context's status either way; or a caller that
// cancels: CANCELLED. The same for a stream. It ended with
// RESOURCE_EXHAUSTED and the BULKHEAD_FULL pushback, a shedding the
// server's own interceptors and metrics saw.
func TestAServerCallWhoseDeadlinePassesInTheQueueEndsWithIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		cancel bool
		server bool       // the deadline is the server's own, not grpc-timeout
		want   codes.Code // OK: the server context's status, whichever it is
	}{
		{"unary, the server's deadline", false, false, true, codes.DeadlineExceeded},
		{"unary, grpc-timeout", false, false, false, codes.OK},
		{"unary, cancelled", false, true, false, codes.Canceled},
		{"stream, the server's deadline", true, false, true, codes.DeadlineExceeded},
		{"stream, grpc-timeout", true, false, false, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }
`))
				if err != nil {
					t.Fatal(err)
				}
				shed, err := grpcmw.NewServer(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer shed.Close()
				// What the server's interceptors below the outermost saw: the
				// status the waiting call ended with, and when.
				type seen struct {
					code, ctx codes.Code
					at        time.Duration
				}
				start := time.Now()
				seenc := make(chan seen, 2)
				record := func(ctx context.Context, err error) {
					seenc <- seen{status.Code(err), status.FromContextError(ctx.Err()).Code(), time.Since(start)}
				}
				// deadline gives the server's context a deadline of its own.
				deadline := func(ctx context.Context) (context.Context, context.CancelFunc) {
					if tc.server {
						return context.WithTimeout(ctx, time.Second)
					}
					return ctx, func() {}
				}
				release := make(chan struct{})
				var handled atomic.Int32
				f := &faultServer{}
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if handled.Add(1) == 1 {
						<-release // holds the one permit
					}
					return &testgrpc.SimpleResponse{}, nil
				})
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					handled.Add(1)
					return nil
				})
				lis := memnet.Listen()
				srv := grpc.NewServer(
					grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
						ctx, cancel := deadline(ctx)
						defer cancel()
						resp, err := h(ctx, req)
						if err != nil {
							record(ctx, err)
						}
						return resp, err
					}, shed.UnaryServerInterceptor()),
					grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
						ctx, cancel := deadline(ss.Context())
						defer cancel()
						err := h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
						if err != nil {
							record(ctx, err)
						}
						return err
					}, shed.StreamServerInterceptor()))
				testgrpc.RegisterTestServiceServer(srv, f)
				go func() { _ = srv.Serve(lis) }()
				defer srv.Stop()
				conn, err := grpc.NewClient("passthrough:///mem",
					grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
					grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				client := testgrpc.NewTestServiceClient(conn)

				held := make(chan error, 1)
				go func() {
					_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
					held <- err
				}()
				synctest.Wait() // the first call holds the permit

				within := 1 * time.Second
				if tc.server {
					within = 5 * time.Second
				}
				ctx, cancel := context.WithTimeout(context.Background(), within)
				defer cancel()
				if tc.cancel {
					time.AfterFunc(500*time.Millisecond, cancel)
				}
				if tc.stream {
					s, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
					if err == nil {
						_, err = s.Recv()
					}
					_ = err // the client's own deadline or cancel
				} else {
					_, _ = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				}
				synctest.Wait()
				var got seen
				select {
				case got = <-seenc:
				default:
					close(release)
					<-held
					t.Fatalf("the waiting call had not ended on the server when its caller's context ended: it waits out maxWaitDuration")
				}
				close(release)
				if err := <-held; err != nil {
					t.Errorf("the call that held the permit: %v", err)
				}
				wantAt := time.Second
				if tc.cancel {
					wantAt = 500 * time.Millisecond
				}
				want := tc.want
				if want == codes.OK {
					want = got.ctx
				}
				if got.code != want || got.code != got.ctx || got.at != wantAt {
					t.Errorf("the waiting call ended on the server with %v at %v (its context's status %v); want %v at %v", got.code, got.at, got.ctx, want, wantAt)
				}
				if n := handled.Load(); n != 1 {
					t.Errorf("%d handlers ran; want 1, the permit holder's", n)
				}
			})
		})
	}
}

// ctxStream is a server stream with a context of the test's.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
