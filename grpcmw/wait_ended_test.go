package grpcmw_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/ctxtest"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/timeout"
)

// A call that waited in the bulkhead's queue and got its permit just as
// its deadline passed (the permit came back first, the caller's goroutine
// ran after the deadline) was sent with a dead context: gRPC failed it at
// once with DEADLINE_EXCEEDED without asking the backend, and the breaker
// counted that against a healthy backend, as docs/concepts.md says a call
// whose context had ended before it began must not be ("not attempted").
// Under a queue that drains at its callers' deadlines, such calls opened
// the breaker. The permit is given back (a later call is admitted) and the
// caller gets DEADLINE_EXCEEDED, as before; only the count changes.
func TestACallAdmittedAfterItsDeadlineFromTheQueueIsNotAttempted(t *testing.T) {
	const config = `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 5s }
  retry: { maxAttempts: 3, initialBackoff: 1s, jitter: 0, retryableStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }
`
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, c testgrpc.TestServiceClient) error
	}{
		{"unary", func(ctx context.Context, c testgrpc.TestServiceClient) error {
			_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return err
		}},
		{"stream", func(ctx context.Context, c testgrpc.TestServiceClient) error {
			st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				return err
			}
			if err := st.RecvMsg(new(testgrpc.StreamingOutputCallResponse)); err != io.EOF {
				return err
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var arrived atomic.Int64
				release := make(chan struct{})
				f := new(faultServer)
				f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if arrived.Add(1) == 1 {
						<-release
					}
					return &testgrpc.SimpleResponse{}, nil
				})
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					if arrived.Add(1) == 1 {
						<-release
					}
					return nil
				})
				waiter := ctxtest.NewEnding()
				var armed atomic.Bool
				// The waiter's deadline passes once the bulkhead handed it
				// the permit, before its attempt: on its own goroutine, as
				// the bulkhead records that it waited
				// (in fake time it waited for no time: armed tells it).
				obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
					if src.Kind != resilience.KindBulkhead {
						return nil
					}
					return recordFunc(func(_ context.Context, e resilience.Event) {
						if e.Type == resilience.EventAcquired && armed.CompareAndSwap(true, false) {
							waiter.End()
						}
					})
				})
				client, chain, stop := inBubbleWith(t, f, config, []grpcmw.Option{grpcmw.WithObserver(obs)})
				defer stop()
				held := make(chan error, 1)
				go func() { held <- tc.call(context.Background(), client) }()
				synctest.Wait() // the first call holds the only permit
				armed.Store(true)
				got := make(chan error, 1)
				go func() { got <- tc.call(waiter, client) }()
				synctest.Wait() // the second waits for it
				close(release)
				if err := <-held; err != nil {
					t.Fatal(err)
				}
				err := <-got
				if status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("got %v, want DEADLINE_EXCEEDED", err)
				}
				if n := arrived.Load(); n != 1 {
					t.Errorf("the server saw %d calls, want 1: the call whose deadline had passed is not sent", n)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 0 {
					t.Errorf("breaker counted %d calls, %d failed; want the first call's success only", m.Calls, m.FailedCalls)
				}
				if err := tc.call(context.Background(), client); err != nil {
					t.Errorf("a later call: %v; want it admitted", err)
				}
			})
		})
	}
}

type recordFunc func(ctx context.Context, e resilience.Event)

func (f recordFunc) Record(ctx context.Context, e resilience.Event) { f(ctx, e) }

// A unary call that waits in the bulkhead's queue until the overall
// timeout ends is refused with the bulkhead's rejection, as docs/grpc.md
// ("Deadlines") says: a local rejection the deadline cut stays that
// rejection. With maxWaitDuration equal to the overall timeout (the wait's
// own end and the deadline at one instant) or longer, the caller got
// RESOURCE_EXHAUSTED with the message "overall timeout of 300ms exceeded:
// bulkhead … is full", an error that also matched timeout.ErrTimeout: the
// overall timeout marked the rejection as its own.
func TestABulkheadWaitTheOverallTimeoutEndsStaysTheRejection(t *testing.T) {
	for _, wait := range []string{"300ms", "400ms"} {
		t.Run(wait, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				held, release := make(chan struct{}), make(chan struct{})
				f := new(faultServer)
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					close(held)
					<-release
					return nil
				})
				client, _, stop := inBubble(t, f, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: `+wait+` }
  timeout: { perAttempt: 0s, overall: 300ms }
`)
				defer stop()
				// A stream (which takes no default timeouts) holds the one permit.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				<-held
				_, err = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				s := status.Convert(err)
				if s.Code() != codes.ResourceExhausted || strings.Contains(s.Message(), "timeout") ||
					!errors.Is(err, bulkhead.ErrFull) || errors.Is(err, timeout.ErrTimeout) {
					t.Errorf("the queued call = %v (code %v, ErrTimeout %v), want the bulkhead's rejection alone",
						err, s.Code(), errors.Is(err, timeout.ErrTimeout))
				}
				close(release)
				if err := st.RecvMsg(new(testgrpc.StreamingOutputCallResponse)); err != io.EOF {
					t.Fatal(err)
				}
			})
		})
	}
}
