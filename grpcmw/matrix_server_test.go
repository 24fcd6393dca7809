package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
)

// The sweep's pair "a shedding server in front × the client's defaults",
// with a real grpcmw.NewServer (its BULKHEAD_FULL carries a pushback
// trailer): grpc-server.md and grpc.md say a meshless client never retries
// it nor waits its pushback, its breaker ignores it, no retry token moves,
// and overload.md that the throttler counts it as a refusal.
func TestASheddingServerInFrontOfTheClientsDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := grpcmw.ParseConfig([]byte("defaults: { bulkhead: { maxConcurrentCalls: 1 } }\n"))
		if err != nil {
			t.Fatal(err)
		}
		shed, err := grpcmw.NewServer(cfg, grpcmw.WithPushback(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		f := new(faultServer)
		release := make(chan struct{})
		f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			<-release
			return &testgrpc.SimpleResponse{}, nil
		})
		var attempts atomic.Int32 // what meshless sends, below its chain
		count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			attempts.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		})
		client, chain, stop := inBubbleOf(t, f, "defaults: {}\n", nil, []grpc.DialOption{count}, shed.ServerOptions()...)
		defer stop()
		held := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			held <- err
		}()
		synctest.Wait() // the first call holds the server's one slot
		e := &matrixEnv{f: f, client: client, chain: chain}
		before := attempts.Load()
		start := time.Now()
		got := e.calls(context.Background(), 60)
		if took := time.Since(start); took != 0 {
			t.Errorf("60 calls took %v: a pushback of a relayed rejection was waited", took)
		}
		if got["ResourceExhausted BULKHEAD_FULL"]+got["ResourceExhausted THROTTLED"] != 60 || got["ResourceExhausted THROTTLED"] == 0 {
			t.Errorf("calls = %v, want BULKHEAD_FULL from the server, and THROTTLED once the throttler has counted 20 refusals", got)
		}
		if n := int(attempts.Load() - before); n != got["ResourceExhausted BULKHEAD_FULL"] {
			t.Errorf("%d attempts sent for %d BULKHEAD_FULL: a relayed rejection was retried", n, got["ResourceExhausted BULKHEAD_FULL"])
		}
		if m := e.breaker(t).Metrics(); m.FailedCalls != 0 || m.Calls != 0 {
			t.Errorf("the breaker counted %d calls, %d failed: it must ignore the server's shedding", m.Calls, m.FailedCalls)
		}
		if tk := chain.Throttle().Tokens(); tk != 10 {
			t.Errorf("retry tokens = %v, want 10", tk)
		}
		close(release)
		if err := <-held; err != nil {
			t.Errorf("the call that held the slot = %v", err)
		}
	})
}
