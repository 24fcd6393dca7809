package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// panicStreamConfig retries (so that a stream keeps what it sent) under an
// overall timeout an hour long.
const panicStreamConfig = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3 }
  timeout: { overall: 1h }
`

// panickingStreams returns a client whose streams go through the chain
// and then an interceptor that panics while boom is set, noting the
// context it was given in seen.
func panickingStreams(t *testing.T, obs resilience.Observer) (testgrpc.TestServiceClient, *atomic.Bool, *atomic.Pointer[context.Context]) {
	t.Helper()
	f := new(faultServer)
	addr, _ := serve(t, f)
	cfg, err := grpcmw.ParseConfig([]byte(panicStreamConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	boom := new(atomic.Bool)
	seen := new(atomic.Pointer[context.Context])
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		seen.Store(&ctx)
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
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn), boom, seen
}

// A stream whose opening panics (an interceptor inside meshless's, the
// codec) ends its contexts on the panic's way up: they were left to the
// caller's context, and to the overall deadline's timer, an hour away.
func TestAStreamThatPanicsOpeningEndsItsContexts(t *testing.T) {
	client, boom, seen := panickingStreams(t, nil)
	boom.Store(true)
	ctx, cancel := context.WithCancel(t.Context()) // a caller's context that outlives the call
	defer cancel()
	if r := recovered(func() { _, _ = client.StreamingOutputCall(ctx, sendParams(1)) }); r != "inner stream interceptor" {
		t.Fatalf("recovered %v, want the interceptor's panic unchanged", r)
	}
	if err := (*seen.Load()).Err(); err == nil {
		t.Fatal("the panicking stream's attempt context is still live")
	}
}
