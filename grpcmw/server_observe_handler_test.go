package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// A server in mode: observe (a rollout of its load shedding) marks only its
// own gates' context: its handler gets the caller's, so the handler's own
// outbound policies, in enforce mode, act as set. Before, the handler got
// the observed context, and its bulkhead with maxWaitDuration refused at
// once a call that would have got a permit 10ms later.
func TestAServerInObserveModeLeavesTheHandlersCallsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := grpcmw.ParseConfig([]byte("defaults: { mode: observe, bulkhead: { maxConcurrentCalls: 10 } }"))
		if err != nil {
			t.Fatal(err)
		}
		shed, err := grpcmw.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer shed.Close()
		// The handler's own outbound bulkhead: enforce mode, waits up to 1s.
		out, err := bulkhead.New(bulkhead.WithConfig(bulkhead.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		held, freed := make(chan struct{}), make(chan struct{})
		go out.Execute(context.Background(), func(context.Context) error {
			defer close(freed)
			close(held)
			time.Sleep(10 * time.Millisecond) // frees its permit 10ms later (fake time)
			return nil
		})
		<-held
		var observed bool
		handler := func(ctx context.Context, _ any) (any, error) {
			observed = resilience.Observing(ctx)
			return nil, out.Execute(ctx, func(context.Context) error { return nil })
		}
		_, err = shed.UnaryServerInterceptor()(context.Background(), nil,
			&grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}, handler)
		<-freed
		if observed {
			t.Errorf("the handler's context is marked observed: the server's observe mode leaks into the handler's own calls")
		}
		if err != nil {
			t.Errorf("the handler's enforce-mode bulkhead (maxWaitDuration 1s) refused at once: %v", err)
		}
	})
}
