package grpcmw_test

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// endingCtx is a context without a deadline whose deadline the test makes
// pass, at an instant of its choosing: Done closes and Err is
// context.DeadlineExceeded once end ran, and the contexts derived from it
// end with it, before end returns, as those of a context's deadline do (it
// has an AfterFunc, which the context package calls instead of watching
// Done on a goroutine of its own).
type endingCtx struct {
	context.Context
	mu    sync.Mutex
	done  chan struct{}
	after []func()
}

func newEndingCtx() *endingCtx {
	return &endingCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *endingCtx) end() {
	c.mu.Lock()
	close(c.done)
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, f := range after {
		if f != nil {
			f()
		}
	}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// AfterFunc runs f once c ended: at once when it has.
func (c *endingCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	default:
	}
	i := len(c.after)
	c.after = append(c.after, f)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i < len(c.after) && c.after[i] != nil {
			c.after[i] = nil
			return true
		}
		return false
	}
}

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
				waiter := newEndingCtx()
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
							waiter.end()
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
