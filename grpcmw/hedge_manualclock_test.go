package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A hedging chain on a clock the test drives (grpcmw.WithClock with a
// resiliencetest.Clock): copies 1 and 2 hang until cancelled, copy 3
// answers. Advancing the clock by hedgingDelay twice must send copies 2 and
// 3, and the call return copy 3's answer.
func TestHedgingOnAManualClock(t *testing.T) {
	clk := resiliencetest.NewClock(time.Now())
	chain := chainFor(t, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms }
`, grpcmw.WithClock(clk))
	icpt := chain.UnaryClientInterceptor()
	var copies atomic.Int32
	invoke := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		if copies.Add(1) == 3 {
			return nil
		}
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // lets the hung call go when the test fails
	done := make(chan error, 1)
	go func() {
		done <- icpt(ctx, "/grpc.testing.TestService/UnaryCall", &testgrpc.SimpleRequest{},
			&testgrpc.SimpleResponse{}, nil, invoke)
	}()
	for step := 1; step <= 2; step++ {
		clk.WaitPending(1) // the next copy's timer
		advanced := make(chan struct{})
		go func() {
			clk.Advance(50 * time.Millisecond)
			close(advanced)
		}()
		select {
		case <-advanced:
		case <-time.After(5 * time.Second):
			cancel()
			<-advanced
			<-done
			t.Fatalf("Advance %d (hedgingDelay) had not returned after 5s: the hedge coordinates its copies on the clock's goroutine", step)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("call: %v, want copy 3's success", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call has not returned")
	}
}
