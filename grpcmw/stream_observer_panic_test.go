package grpcmw_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A stream whose observer panics at any event of its life — a gate's exit
// as the stream ends (the bulkhead's release, the breaker's call), a
// half-open breaker's verdict on its first response, its retry policy told
// of its last attempt, its call's own event — ends as a call that panics,
// on the panic's way up: the stream's lock is released, its permits are
// back and the call is recorded once. Before, a panic in RecvMsg's end of
// the stream (finishLocked, failedLocked's settling and ending, a probe's
// commit) kept the lock: the stream's other methods, and its context's
// watcher, blocked for ever, and the call was never recorded.
func TestAStreamWhoseObserverPanicsReleasesItsLock(t *testing.T) {
	const yaml = `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms }
  bulkhead: { maxConcurrentCalls: 4 }
  circuitBreaker: { minimumNumberOfCalls: 1, slidingWindowSize: 1, waitDurationInOpenState: 10s, permittedNumberOfCallsInHalfOpenState: 1 }
`
	for _, scenario := range []string{"ok", "internal", "probe"} {
		f := new(faultServer)
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
			if scenario == "internal" {
				return status.Error(codes.Internal, "bug") // not retried
			}
			for range 2 {
				if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
					return err
				}
			}
			return nil
		})
		addr, _ := serve(t, f)
		// run makes one stream, its observer panicking at its event panicAt
		// (none when -1), and returns the events and what it panicked with.
		run := func(t *testing.T, panicAt int) (log []string, r any, st testgrpc.TestService_StreamingOutputCallClient, chain *grpcmw.Chain) {
			var (
				mu sync.Mutex
				on bool
			)
			obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
				return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
					mu.Lock()
					if !on {
						mu.Unlock()
						return
					}
					log = append(log, fmt.Sprintf("%v %v %v", src.Kind, ev.Type, ev.Outcome))
					p := len(log)-1 == panicAt
					mu.Unlock()
					if p {
						panic("observer")
					}
				})
			})
			clk := resiliencetest.NewClock(time.Now())
			client, chain, _ := dial(t, addr, yaml, grpcmw.WithObserver(obs), grpcmw.WithClock(clk))
			t.Cleanup(chain.Close)
			if scenario == "probe" { // a failure opens the breaker; its wait over, the stream is its probe
				f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					return nil, status.Error(codes.Internal, "down")
				})
				_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				clk.Advance(10 * time.Second)
				if b, _ := chain.Breaker(testService); b.State() != circuitbreaker.StateHalfOpen {
					t.Fatalf("breaker %v, want HALF_OPEN", b.State())
				}
			}
			mu.Lock()
			on = true
			mu.Unlock()
			r = func() (r any) {
				defer func() {
					if p := recover(); p != nil {
						r = p
					}
				}()
				var err error
				st, err = client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					return err
				}
				for {
					if _, err := st.Recv(); err == io.EOF {
						return nil
					} else if err != nil {
						return status.Code(err)
					}
				}
			}()
			mu.Lock()
			defer mu.Unlock()
			on = false
			return append([]string(nil), log...), r, st, chain
		}
		var base []string
		t.Run(scenario, func(t *testing.T) {
			var r any
			base, r, _, _ = run(t, -1)
			if want := map[string]any{"ok": nil, "internal": codes.Internal, "probe": nil}[scenario]; r != want {
				t.Fatalf("the stream ended with %v, want %v", r, want)
			}
		})
		for i, ev := range base {
			t.Run(fmt.Sprintf("%s/%d:%s", scenario, i, ev), func(t *testing.T) {
				log, r, st, chain := run(t, i)
				if r != "observer" {
					t.Fatalf("recovered %v, want the observer's panic", r)
				}
				if st != nil {
					unlocked := make(chan struct{})
					go func() {
						_ = st.CloseSend()
						_, _ = st.Recv()
						close(unlocked)
					}()
					select {
					case <-unlocked:
					case <-time.After(10 * time.Second): // real time: before, it never came
						t.Fatal("CloseSend and Recv blocked: the stream's lock is still held")
					}
				}
				if b, _ := chain.Bulkhead(testService); b.Active() != 0 {
					t.Errorf("%d bulkhead permits out after the panic, want 0", b.Active())
				}
				all := strings.Join(log, "\n")
				if n := strings.Count(all, "call call"); n != 1 {
					t.Errorf("%d call events, want 1; events:\n%s", n, all)
				}
				if n := strings.Count(all, "retry retry_done"); n != 1 {
					t.Errorf("%d retry_done events, want 1; events:\n%s", n, all)
				}
				if n := strings.Count(all, "retry attempt"); n != 1 { // the panic is no attempt of its own
					t.Errorf("%d attempt events, want 1; events:\n%s", n, all)
				}
			})
		}
	}
}
