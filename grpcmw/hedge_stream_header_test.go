package grpcmw_test

import (
	"context"
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
)

// A caller that asks for the header before it receives (a common pattern)
// makes the hedge commit at the first copy's header. A copy whose server
// fails at once with a non-fatal code (a trailers-only UNAVAILABLE) has no
// header, and grpc-go's ClientStream.Header returns (nil, nil) for it ("the
// user should get it by calling Recv"): the copy reads its status, and the
// non-fatal failure sends the next copy. (It was taken as an answer and
// committed: the caller got UNAVAILABLE and no further copy was sent.)
func TestAHedgedStreamHeaderFirstHedgesANonFatalFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{0, 0, 0},
			codes: []codes.Code{codes.Unavailable, codes.OK, codes.OK}, count: 2}
		f := new(faultServer)
		f.setStream(s.handler)
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Header(); err != nil {
			t.Fatal(err)
		}
		got, err := recvBodies(st)
		if err != nil || string(got) != "\x02\x02" || s.n.Load() != 2 {
			t.Fatalf("got %v, %v with %d streams; want copy 2's two responses (copy 1's UNAVAILABLE is non-fatal)", got, err, s.n.Load())
		}
	})
}

// The same call without Header: the non-fatal failure sends copy 2.
func TestAHedgedStreamRecvFirstHedgesNonFatalFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{0, 0, 0},
			codes: []codes.Code{codes.Unavailable, codes.OK, codes.OK}, count: 2}
		f := new(faultServer)
		f.setStream(s.handler)
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvBodies(st)
		if err != nil || string(got) != "\x02\x02" || s.n.Load() != 2 {
			t.Fatalf("got %v, %v with %d streams; want copy 2's two responses", got, err, s.n.Load())
		}
	})
}

// A half-open probe whose stream ends without a header is judged by its
// status, not told to the breaker as a success (Admission.Commit(nil)) as
// it was: a backend that still failed every stream closed the breaker for
// callers that ask for the header first.
func TestAHedgedStreamHeaderFirstProbeFailureKeepsTheBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{0}, codes: []codes.Code{codes.Unavailable}}
		f := new(faultServer)
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  circuitBreaker: { slidingWindowType: COUNT_BASED, slidingWindowSize: 2, minimumNumberOfCalls: 2, failureRateThreshold: 50, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1 }
  hedging: { maxAttempts: 2, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`)
		defer stop()
		open := func() {
			st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = recvBodies(st) // two copies, two UNAVAILABLE: the breaker opens
		}
		open()
		b, _ := chain.Breaker(testService)
		if got := b.State().String(); got != "OPEN" {
			t.Fatalf("breaker %s, want OPEN", got)
		}
		time.Sleep(2 * time.Second) // the bubble's clock: past waitDurationInOpenState
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = st.Header() // the probe: a header-first caller
		if _, err := recvBodies(st); status.Code(err) != codes.Unavailable {
			t.Fatalf("probe: %v, want UNAVAILABLE", err)
		}
		if got := b.State().String(); got == "CLOSED" {
			t.Fatalf("breaker %s after its half-open probe failed UNAVAILABLE; want OPEN", got)
		}
	})
}

// A hedged stream whose Header fails (a copy answered with a fatal code
// before any header) is over, as gRPC ends a stream whose Header fails: the
// call is recorded at once with that answer (not later, as CANCELLED, when
// the caller's context ends or the stream is collected), and, as gRPC's,
// Header returns no error: Recv returns it. (Header returned it and the
// call stayed open.)
func TestAHedgedStreamWhoseHeaderFailsEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended atomic.Int32
		var code atomic.Value
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			if src.Kind != resilience.KindCall {
				return nil
			}
			return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventCall {
					ended.Add(1)
					code.Store(status.Code(e.Err))
				}
			})
		})
		s := &streamScript{delays: []time.Duration{0}, codes: []codes.Code{codes.NotFound}}
		f := new(faultServer)
		f.setStream(s.handler)
		client, _, stop := inBubbleWith(t, f, hedgeConfig, []grpcmw.Option{grpcmw.WithObserver(obs)})
		defer stop()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if md, err := st.Header(); md != nil || err != nil {
			t.Fatalf("Header() = %v, %v; want nil, nil as gRPC's (the error is Recv's)", md, err)
		}
		synctest.Wait()
		if n := ended.Load(); n != 1 {
			t.Fatalf("%d call events after Header failed, want 1", n)
		}
		if c := code.Load(); c != codes.NotFound {
			t.Errorf("the call was recorded with %v, want NOT_FOUND", c)
		}
		if _, err := st.Recv(); status.Code(err) != codes.NotFound {
			t.Errorf("Recv after Header = %v, want NOT_FOUND", err)
		}
		cancel()
		synctest.Wait()
		if n := ended.Load(); n != 1 {
			t.Errorf("%d call events, want 1", n)
		}
	})
}

// A panic below meshless while a hedged stream runs its copies (here, the
// first copy's stream interceptor) goes on up through the caller's RecvMsg;
// a caller that recovers and receives again is told the stream failed
// (INTERNAL), not that it ended OK (io.EOF, as it was).
func TestAHedgedStreamWhoseHedgePanickedIsNoCleanEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{0}, count: 1}
		f := new(faultServer)
		f.setStream(s.handler)
		boom := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			panic("below meshless")
		}
		client, _, stop := inBubbleDial(t, f, hedgeConfig, grpc.WithChainStreamInterceptor(boom))
		defer stop()
		st, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		r := func() (r any) {
			defer func() { r = recover() }()
			_, _ = st.Recv()
			return nil
		}()
		if r != "below meshless" {
			t.Fatalf("recovered %v, want the panic unchanged", r)
		}
		if _, err := st.Recv(); status.Code(err) != codes.Internal {
			t.Errorf("Recv after the panic = %v, want INTERNAL (not a clean end)", err)
		}
	})
}
