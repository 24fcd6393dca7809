package grpcmw_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
)

// Regression tests for issue 9 item 1 (and issue 8): before the one
// pipeline, a panic below meshless lost its bulkhead permit on every path,
// and after maxConcurrentCalls panics the method admitted nothing more.

const panicLimit = 3

const panicConfig = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  bulkhead: { maxConcurrentCalls: 3 }
`

// recovered runs f and returns what it panicked with.
func recovered(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// admitsFullLimit checks that bh is back to zero in flight and that
// panicLimit calls held at the server at once are all admitted.
func admitsFullLimit(t *testing.T, bh *bulkhead.Bulkhead, f *faultServer, call func() error) {
	t.Helper()
	if bh.Active() != 0 {
		t.Fatalf("after the panics %d permits are still out, want 0", bh.Active())
	}
	arrived, release := make(chan struct{}, panicLimit), make(chan struct{})
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		arrived <- struct{}{}
		<-release
		return &testgrpc.SimpleResponse{}, nil
	})
	f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		arrived <- struct{}{}
		<-release
		return s.Send(&testgrpc.StreamingOutputCallResponse{})
	})
	var wg sync.WaitGroup
	errs := make(chan error, panicLimit)
	for range panicLimit {
		wg.Go(func() { errs <- call() })
	}
	for range panicLimit {
		<-arrived // every one of the limit's calls reached the server
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a call within the limit failed: %v", err)
		}
	}
}

func newPanicChain(t *testing.T, opts ...grpcmw.Option) *grpcmw.Chain {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(panicConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

func TestIssue9ClientUnaryPanicGivesPermitsBack(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	chain := newPanicChain(t)
	var boom atomic.Bool
	inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if boom.Load() {
			panic("inner interceptor")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(chain.UnaryClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	boom.Store(true)
	for range 2 * panicLimit {
		if r := recovered(func() { _, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}) }); r != "inner interceptor" {
			t.Fatalf("recovered %v, want the interceptor's panic unchanged", r)
		}
	}
	boom.Store(false)
	bh, _ := chain.Bulkhead(testService)
	admitsFullLimit(t, bh, f, func() error {
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		return err
	})
}

func TestIssue9ClientStreamPanicGivesPermitsBack(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	chain := newPanicChain(t)
	var boom atomic.Bool
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if boom.Load() {
			panic("inner stream interceptor")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(chain.StreamClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	boom.Store(true)
	for range 2 * panicLimit {
		r := recovered(func() { _, _ = client.StreamingOutputCall(t.Context(), sendParams(1)) })
		if r != "inner stream interceptor" {
			t.Fatalf("recovered %v, want the interceptor's panic unchanged", r)
		}
	}
	boom.Store(false)
	bh, _ := chain.Bulkhead(testService)
	admitsFullLimit(t, bh, f, func() error {
		s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
		if err != nil {
			return err
		}
		_, err = recvAll(s)
		return err
	})
}

// recoverUnary and recoverStream stand for a recovery interceptor (as
// go-grpc-middleware's), installed outside meshless's.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Error(codes.Internal, fmt.Sprint("recovered: ", r))
		}
	}()
	return handler(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Error(codes.Internal, fmt.Sprint("recovered: ", r))
		}
	}()
	return handler(srv, ss)
}

func TestIssue9ServerPanicsGivePermitsBack(t *testing.T) {
	for _, path := range []string{"unary", "stream"} {
		t.Run(path, func(t *testing.T) {
			cfg, err := grpcmw.ParseConfig([]byte(panicConfig))
			if err != nil {
				t.Fatal(err)
			}
			srvChain, err := grpcmw.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f := new(faultServer)
			addr, _ := serve(t, f,
				grpc.ChainUnaryInterceptor(recoverUnary, srvChain.UnaryServerInterceptor()),
				grpc.ChainStreamInterceptor(recoverStream, srvChain.StreamServerInterceptor()))
			f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) { panic("handler") })
			f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
				panic("handler")
			})
			client, _, _ := dial(t, addr, "defaults: { retry: { enabled: false }, circuitBreaker: { enabled: false } }")
			call := func() error {
				if path == "unary" {
					_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
					return err
				}
				s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
				if err != nil {
					return err
				}
				_, err = recvAll(s)
				return err
			}
			for range 2 * panicLimit {
				if err := call(); status.Code(err) != codes.Internal {
					t.Fatalf("a panicking handler answered %v, want the recovery's INTERNAL", err)
				}
			}
			bh, _ := srvChain.Bulkhead(testService)
			admitsFullLimit(t, bh, f, call)
		})
	}
}
