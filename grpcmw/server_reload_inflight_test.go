package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// A Server's calls in flight across a reload — a unary call and a server
// stream, held by the handler — keep the bulkhead permits they took and
// give them back to it (reload.md): after a reload that shrinks the
// bulkhead, the key's next call makes the new one, which admits its own
// limit's worth while the old permits are still held; after a reload to B
// and back to A with no call between, A's bulkhead is kept, still full.
// Every permit is back when the calls end.
func TestAServersCallsInFlightAcrossAReloadKeepTheirBulkhead(t *testing.T) {
	const yamlA = "defaults:\n  bulkhead: { maxConcurrentCalls: 2 }\n"
	const yamlB = "defaults:\n  bulkhead: { maxConcurrentCalls: 1 }\n"
	for _, back := range []bool{false, true} {
		t.Run(fmt.Sprintf("back to A %v", back), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				wait := func(ctx context.Context) error {
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return status.FromContextError(ctx.Err()).Err()
					}
				}
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if req.GetPayload() != nil {
						if err := wait(ctx); err != nil {
							return nil, err
						}
					}
					return &testgrpc.SimpleResponse{}, nil
				})
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					return wait(s.Context())
				})
				cfg, err := grpcmw.ParseConfig([]byte(yamlA))
				if err != nil {
					t.Fatal(err)
				}
				s, err := grpcmw.NewServer(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				lis := memnet.Listen()
				srv := grpc.NewServer(s.ServerOptions()...)
				testgrpc.RegisterTestServiceServer(srv, f)
				go func() { _ = srv.Serve(lis) }()
				defer srv.Stop()
				conn, err := grpc.NewClient("passthrough:///mem",
					grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
					grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = conn.Close() }()
				client := testgrpc.NewTestServiceClient(conn)
				ctx := context.Background()
				var held []chan string
				hold := func(stream bool) {
					done := make(chan string, 1)
					go func() {
						var err error
						if stream {
							var cs testgrpc.TestService_StreamingOutputCallClient
							if cs, err = client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}); err == nil {
								_, err = cs.Recv()
								if errors.Is(err, io.EOF) { // the stream ended OK
									err = nil
								}
							}
						} else {
							_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{}})
						}
						done <- outcome(err)
					}()
					synctest.Wait()
					held = append(held, done)
				}
				hold(false)
				hold(true)
				old, ok := s.Bulkhead(testService)
				if !ok || old.Active() != 2 {
					t.Fatalf("before the reload: bulkhead %v, want 2 permits held", old)
				}
				reload := func(y string) {
					cfg, err := grpcmw.ParseConfig([]byte(y))
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Reload(cfg); err != nil {
						t.Fatal(err)
					}
				}
				reload(yamlB)
				if back {
					reload(yamlA)
				}
				call := func() string {
					_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
					return outcome(err)
				}
				if back {
					if got := call(); got != "ResourceExhausted BULKHEAD_FULL" {
						t.Errorf("a call after B and back to A: %s, want A's bulkhead, kept, full", got)
					}
				} else {
					if got := call(); got != "OK" {
						t.Errorf("the first call after the reload: %s, want the new bulkhead's permit", got)
					}
					hold(false)
					if got := call(); got != "ResourceExhausted BULKHEAD_FULL" {
						t.Errorf("a call past the new limit: %s", got)
					}
				}
				close(release)
				for _, h := range held {
					if got := <-h; got != "OK" {
						t.Errorf("a call in flight: %s", got)
					}
				}
				synctest.Wait()
				bh, _ := s.Bulkhead(testService)
				if old.Active() != 0 || bh.Active() != 0 || (bh == old) != back {
					t.Errorf("after every call ended: old bulkhead %d permits, the one in force %d (the same: %v)", old.Active(), bh.Active(), bh == old)
				}
			})
		})
	}
}
