package grpcmw_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// faultServer is a TestService whose answers a test scripts, counting the
// calls that reach it.
type faultServer struct {
	testgrpc.UnimplementedTestServiceServer
	unary  atomic.Pointer[func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error)]
	stream atomic.Pointer[func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error]
	bidi   atomic.Pointer[func(s testgrpc.TestService_FullDuplexCallServer) error]
	calls  atomic.Int32
	empty  atomic.Int32
}

func (f *faultServer) setUnary(fn func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error)) {
	f.unary.Store(&fn)
}

func (f *faultServer) setStream(fn func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error) {
	f.stream.Store(&fn)
}

func (f *faultServer) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	f.calls.Add(1)
	if fn := f.unary.Load(); fn != nil {
		return (*fn)(ctx, req)
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (f *faultServer) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	f.empty.Add(1)
	return &testgrpc.Empty{}, nil
}

func (f *faultServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
	f.calls.Add(1)
	if fn := f.stream.Load(); fn != nil {
		return (*fn)(req, s)
	}
	for range req.GetResponseParameters() {
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

func (f *faultServer) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	f.calls.Add(1)
	if fn := f.bidi.Load(); fn != nil {
		return (*fn)(s)
	}
	for {
		in, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// failing answers every unary call with code.
func failing(code codes.Code) func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		return nil, status.Error(code, "scripted "+code.String())
	}
}

// hanging answers when the call's context ends.
func hanging(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// serve starts a real gRPC server on loopback TCP with the fault server and a
// health service, and returns its address.
func serve(t *testing.T, f *faultServer, opts ...grpc.ServerOption) (string, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, f)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), hs
}

// dial connects to addr through a chain built from yamlConfig.
func dial(t *testing.T, addr, yamlConfig string, opts ...grpcmw.Option) (testgrpc.TestServiceClient, *grpcmw.Chain, *grpc.ClientConn) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn), chain, conn
}

const testService = "grpc.testing.TestService"

func setTrailer(ctx context.Context, key, value string) error {
	return grpc.SetTrailer(ctx, metadata.Pairs(key, value))
}

func timeSleepMs() { time.Sleep(time.Millisecond) }
