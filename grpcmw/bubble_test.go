package grpcmw_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// inBubble serves f (a faultServer, or any TestService) over memnet and dials it through a chain built from
// yamlConfig, for tests that run inside a testing/synctest bubble (loopback
// TCP does not work there; memnet does). The returned stop closes the
// connection and the server; call it before the bubble's function returns.
func inBubble(t *testing.T, f testgrpc.TestServiceServer, yamlConfig string, srvOpts ...grpc.ServerOption) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	return inBubbleWith(t, f, yamlConfig, nil, srvOpts...)
}

// inBubbleWith is inBubble with chain options.
func inBubbleWith(t *testing.T, f testgrpc.TestServiceServer, yamlConfig string, chainOpts []grpcmw.Option, srvOpts ...grpc.ServerOption) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	return inBubbleOf(t, f, yamlConfig, chainOpts, nil, srvOpts...)
}

// inBubbleDial is inBubble with dial options after the chain's (an
// interceptor below meshless's).
func inBubbleDial(t *testing.T, f testgrpc.TestServiceServer, yamlConfig string, dialOpts ...grpc.DialOption) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	return inBubbleOf(t, f, yamlConfig, nil, dialOpts)
}

func inBubbleOf(t *testing.T, f testgrpc.TestServiceServer, yamlConfig string, chainOpts []grpcmw.Option, dialOpts []grpc.DialOption, srvOpts ...grpc.ServerOption) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	lis := memnet.Listen()
	srv := grpc.NewServer(srvOpts...)
	testgrpc.RegisterTestServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, chainOpts...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///mem",
		append(append(chain.DialOptions(), dialOpts...),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	return testgrpc.NewTestServiceClient(conn), chain, func() {
		_ = conn.Close()
		srv.Stop()
		chain.Close()
	}
}
