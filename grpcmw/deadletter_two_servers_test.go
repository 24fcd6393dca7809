package grpcmw_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/redistest"
)

// Two services whose deadLetter sections name the same namespace on two
// Redis servers keep their calls each on its own server: before, the
// second section reused the store (and the client) of the first.
func TestTwoRedisServersWithOneNamespaceAreTwoStores(t *testing.T) {
	one, two := redistest.Start(t), redistest.Start(t)
	cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
services:
  grpc.testing.TestService:
    deadLetter: { on: [RETRIES_EXHAUSTED], store: redis, namespace: ns, redis: { addr: "` + one.Addr() + `" } }
  grpc.testing.UnimplementedService:
    deadLetter: { on: [RETRIES_EXHAUSTED], store: redis, namespace: ns, redis: { addr: "` + two.Addr() + `" } }
`))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	fail := func(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
		return status.Error(codes.Unavailable, "down")
	}
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:1", append(chain.DialOptions(),
		grpc.WithChainUnaryInterceptor(fail), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatalf("TestService's call: %v, want it deferred", err)
	}
	if _, err := testgrpc.NewUnimplementedServiceClient(conn).UnimplementedCall(context.Background(), &testgrpc.Empty{}); !errors.Is(err, deadletter.ErrDeferred) {
		t.Fatalf("UnimplementedService's call: %v, want it deferred", err)
	}
	for _, c := range []struct {
		srv  *redistest.Server
		key  string
		want int64
	}{
		{one, "ns:dl:{grpc.testing.TestService}:w", 1},
		{one, "ns:dl:{grpc.testing.UnimplementedService}:w", 0},
		{two, "ns:dl:{grpc.testing.UnimplementedService}:w", 1},
		{two, "ns:dl:{grpc.testing.TestService}:w", 0},
	} {
		rdb := redis.NewClient(&redis.Options{Addr: c.srv.Addr()})
		n, err := rdb.XLen(context.Background(), c.key).Result()
		_ = rdb.Close()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("%s on %s holds %d entries, want %d", c.key, c.srv.Addr(), n, c.want)
		}
	}
}
