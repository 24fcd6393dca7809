package grpcmw_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// hedgePanicConfig hedges server streams behind a bulkhead, so that the
// copies' permits can be counted.
const hedgePanicConfig = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 5 }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`

// panickingRecv is a stream whose RecvMsg panics; panickingSend, one whose
// SendMsg does.
type (
	panickingRecv struct{ grpc.ClientStream }
	panickingSend struct{ grpc.ClientStream }
)

func (panickingRecv) RecvMsg(any) error { panic("below meshless") }
func (panickingSend) SendMsg(any) error { panic("below meshless") }

// A hedged stream whose copy panics before any copy was committed — the
// first copy's streamer, on the caller's goroutine; the second copy's, on
// a goroutine of its own while the first waits at the server; the first
// copy's SendMsg or RecvMsg — is a call that failed, as a stream whose opening panics
// is (metrics.md, "A call that panics"): recorded once, on the panic's way
// up, as a failure whose error type is UNKNOWN, its hedging policy's call
// over with no winner, every copy's permit back and the stream's context
// ended. Before, no call was recorded until the caller, having recovered,
// received again (then as an INTERNAL failure) or dropped the stream (then
// CANCELLED, when the collector ran), and the stream's context stayed live.
func TestAHedgedStreamWhoseCopyPanicsIsRecordedAsAFailedCall(t *testing.T) {
	for _, path := range []string{"first copy's streamer", "second copy's streamer", "first copy's SendMsg", "first copy's RecvMsg"} {
		t.Run(path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &streamScript{delays: []time.Duration{time.Second}, count: 1}
				f := new(faultServer)
				f.setStream(s.handler)
				var opened atomic.Int32
				boom := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
					n := opened.Add(1)
					switch {
					case path == "first copy's streamer" && n == 1, path == "second copy's streamer" && n == 2:
						panic("below meshless")
					}
					cs, err := streamer(ctx, desc, cc, method, opts...)
					switch {
					case err == nil && path == "first copy's SendMsg":
						cs = panickingSend{cs}
					case err == nil && path == "first copy's RecvMsg":
						cs = panickingRecv{cs}
					}
					return cs, err
				}
				obs := new(resiliencetest.Observer)
				client, chain, stop := inBubbleOf(t, f, hedgePanicConfig, []grpcmw.Option{grpcmw.WithObserver(obs)},
					[]grpc.DialOption{grpc.WithChainStreamInterceptor(boom)})
				defer stop()
				st, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if r := recovered(func() { _, _ = st.Recv() }); r != "below meshless" {
					t.Fatalf("recovered %v, want the panic unchanged", r)
				}
				// What the panic's way up recorded, before the caller does
				// anything more with the stream.
				var calls, hedges int
				for _, rec := range obs.Recorded() {
					switch ev := rec.Event; {
					case rec.Source.Kind == resilience.KindCall && ev.Type == resilience.EventCall:
						calls++
						if ev.Outcome != resilience.Failure || ev.ErrorType != "UNKNOWN" {
							t.Errorf("the call's event: outcome %v, error type %q; want failure, UNKNOWN (metrics.md)", ev.Outcome, ev.ErrorType)
						}
					case rec.Source.Kind == resilience.KindHedging && ev.Type == resilience.EventHedgeDone:
						hedges++
						if ev.Winner != 0 {
							t.Errorf("the hedging policy's end: winner %d, want none", ev.Winner)
						}
					}
				}
				if calls != 1 || hedges != 1 {
					t.Errorf("%d call events and %d hedging ends when the panic reached the caller; want 1 each\n%s",
						calls, hedges, strings.Join(obs.Trace(), "\n"))
				}
				if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
					t.Errorf("%d bulkhead permits out after the panic, want 0", bh.Active())
				}
				if st.Context().Err() == nil {
					t.Error("the stream's context is still live after the panic")
				}
				// A caller that receives again is told the stream failed,
				// and the call is not recorded a second time.
				if _, err := st.Recv(); status.Code(err) != codes.Internal {
					t.Errorf("Recv after the panic = %v, want INTERNAL", err)
				}
				synctest.Wait()
				if n := len(obs.Events(resilience.EventCall)); n != 1 {
					t.Errorf("%d call events after a second Recv, want 1", n)
				}
			})
		})
	}
}

// hedgeLoserConfig hedges with four copies behind a bulkhead of three, so
// that the fourth copy is refused at once.
const hedgeLoserConfig = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 3 }
  hedging: { maxAttempts: 4, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`

// A hedged stream whose copies lost after they got a response are each
// given back, even when giving one back panics (an observer of its
// bulkhead's release: meshless's own hooks). Here three copies answer at
// once, while the hedging policy is held (its observer blocks at the
// fourth copy, which the full bulkhead then refuses): one is committed, and
// the first loser's release panics. Before, the panic left the loop that
// gives the losers back, and the second loser's permit was never given
// back: the bulkhead held it after the stream had ended.
func TestAHedgedStreamGivesEveryLoserBackWhenOneReleasePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{200 * time.Millisecond, 150 * time.Millisecond, 100 * time.Millisecond}, count: 1}
		f := new(faultServer)
		f.setStream(s.handler)
		held, release := make(chan struct{}), make(chan struct{})
		var released atomic.Int32
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
				switch {
				case src.Kind == resilience.KindHedging && ev.Type == resilience.EventHedge && ev.Attempt == 4:
					close(held)
					<-release
				case src.Kind == resilience.KindBulkhead && ev.Type == resilience.EventReleased:
					if released.Add(1) == 1 {
						panic("observer")
					}
				}
			})
		})
		client, chain, stop := inBubbleWith(t, f, hedgeLoserConfig, []grpcmw.Option{grpcmw.WithObserver(obs)})
		defer stop()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan any, 1)
		go func() { got <- recovered(func() { _, _ = st.Recv() }) }()
		<-held                             // at 150 ms, the fourth copy's turn
		time.Sleep(100 * time.Millisecond) // the three copies answer at 200 ms
		synctest.Wait()
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 3 {
			t.Fatalf("%d permits out with three copies answered, want 3", bh.Active())
		}
		close(release)
		if r := <-got; r != "observer" {
			t.Fatalf("recovered %v, want the observer's panic unchanged", r)
		}
		cancel() // the caller gives the stream up: the committed copy is given back
		synctest.Wait()
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Errorf("%d bulkhead permits out after the stream ended, want 0", bh.Active())
		}
	})
}

// watchedCtx is a caller's context that is not one of package context's,
// and counts the contexts derived from it that are live: package context
// registers each with its AfterFunc, and stops that when it ends.
type watchedCtx struct {
	context.Context
	live atomic.Int32
}

func (c *watchedCtx) Done() <-chan struct{} { return make(chan struct{}) }

func (c *watchedCtx) AfterFunc(func()) func() bool {
	c.live.Add(1)
	var stopped atomic.Bool
	return func() bool {
		if stopped.Swap(true) {
			return false
		}
		c.live.Add(-1)
		return true
	}
}

// A committed hedged stream whose release panics as it ends (an observer
// of its bulkhead's release, told when the caller reads the stream's end)
// is recorded as a call that panicked, and its contexts end, as the panic
// goes on up. Before, the panic left the stream's end half done: the call
// was never recorded, and the stream's context stayed registered with the
// caller's until that ended.
func TestAHedgedStreamWhoseEndPanicsIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{0}, count: 1}
		f := new(faultServer)
		f.setStream(s.handler)
		var calls []resilience.Event
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
				switch {
				case src.Kind == resilience.KindBulkhead && ev.Type == resilience.EventReleased:
					panic("observer")
				case src.Kind == resilience.KindCall && ev.Type == resilience.EventCall:
					calls = append(calls, ev)
				}
			})
		})
		client, _, stop := inBubbleWith(t, f, hedgePanicConfig, []grpcmw.Option{grpcmw.WithObserver(obs)})
		defer stop()
		ctx := &watchedCtx{Context: context.Background()}
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		if r := recovered(func() { _, _ = st.Recv() }); r != "observer" {
			t.Fatalf("recovered %v, want the observer's panic unchanged", r)
		}
		if len(calls) != 1 || calls[0].Outcome != resilience.Failure || calls[0].ErrorType != "UNKNOWN" {
			t.Errorf("call events %+v, want one failure, UNKNOWN", calls)
		}
		synctest.Wait()
		if n := ctx.live.Load(); n != 0 {
			t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
		}
	})
}
