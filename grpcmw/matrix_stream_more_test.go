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

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// More rows of the stream sweep (TestEveryDefaultMeetsEverySettingForStreams),
// each with a harness of its own.
func TestEveryDefaultMeetsEverySettingForStreamsMore(t *testing.T) {
	// grpc-server.md, grpc.md: a meshless server that sheds answers
	// BULKHEAD_FULL with a pushback; a meshless client never retries it nor
	// waits the pushback, its breaker ignores it, no retry token moves, and
	// the throttler counts it as a refusal — for a stream as for a unary call.
	t.Run("a shedding grpcmw.NewServer in front × streams", func(t *testing.T) {
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
			var handled atomic.Int32
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				if handled.Add(1) == 1 {
					_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
					<-release
				}
				return nil
			})
			var attempts atomic.Int32 // what meshless opens, below its chain
			count := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				attempts.Add(1)
				return streamer(ctx, desc, cc, method, opts...)
			})
			client, chain, stop := inBubbleOf(t, f, "defaults: {}\n", nil, []grpc.DialOption{count}, shed.ServerOptions()...)
			defer stop()
			held, err := client.StreamingOutputCall(context.Background(), sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := held.Recv(); err != nil { // the first stream holds the server's one slot
				t.Fatal(err)
			}
			e := &matrixEnv{f: f, client: client, chain: chain}
			before := attempts.Load()
			start := time.Now()
			got := e.streams(context.Background(), 60)
			got2 := e.bidis(context.Background(), 5)
			if took := time.Since(start); took != 0 {
				t.Errorf("65 streams took %v: a pushback of a relayed rejection was waited", took)
			}
			if got["ResourceExhausted BULKHEAD_FULL"]+got["ResourceExhausted THROTTLED"] != 60 || got["ResourceExhausted THROTTLED"] == 0 {
				t.Errorf("streams = %v, want BULKHEAD_FULL from the server, then THROTTLED", got)
			}
			if got2["ResourceExhausted BULKHEAD_FULL"]+got2["ResourceExhausted THROTTLED"] != 5 {
				t.Errorf("bidis = %v, want BULKHEAD_FULL or THROTTLED", got2)
			}
			if n := int(attempts.Load() - before); n != got["ResourceExhausted BULKHEAD_FULL"]+got2["ResourceExhausted BULKHEAD_FULL"] {
				t.Errorf("%d streams opened for %v and %v: a relayed BULKHEAD_FULL was retried", n, got, got2)
			}
			if m := e.breaker(t).Metrics(); m.FailedCalls != 0 {
				t.Errorf("the breaker counted %d failures: it must ignore the server's shedding", m.FailedCalls)
			}
			if tk := chain.Throttle().Tokens(); tk != 10 {
				t.Errorf("retry tokens = %v, want 10", tk)
			}
			close(release)
			if _, err := recvAll(held); err != nil {
				t.Errorf("the stream that held the slot = %v", err)
			}
		})
	})

	// configuration.md, observe mode: hedging decides without acting — one
	// copy of a hedged stream goes, whatever the delay.
	t.Run("observe × hedged server stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
				time.Sleep(50 * time.Millisecond)
				return status.Error(codes.Unavailable, "slow failure")
			})
			client, chain, metrics, stop := observed(t, f, "defaults:\n  mode: observe\n  retry: { enabled: false }\n  hedging: { maxAttempts: 3, hedgingDelay: 10ms }\n")
			defer stop()
			e := &matrixEnv{f: f, client: client, chain: chain, metrics: metrics}
			if got := e.streams(context.Background(), 2); got["Unavailable"] != 2 || f.calls.Load() != 2 {
				t.Errorf("streams = %v after %d copies, want 2 UNAVAILABLE, one copy each: %v", got, f.calls.Load(), metrics())
			}
		})
	})

	// grpc-streams.md: the method's own perAttempt bounds each attempt's
	// stream for its whole life — a hedged stream's committed copy too; a
	// caller's earlier deadline is its own, not a meshless timeout.
	t.Run("timeouts × hedged server stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				for {
					if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
						return err
					}
					select {
					case <-time.After(time.Second):
					case <-s.Context().Done():
						return status.FromContextError(s.Context().Err()).Err()
					}
				}
			})
			client, chain, metrics, stop := observed(t, f, "defaults:\n  retry: { enabled: false }\n  hedging: { hedgingDelay: 10ms }\n"+
				"services:\n  grpc.testing.TestService:\n    methods:\n      StreamingOutputCall: { timeout: { perAttempt: 2500ms } }\n")
			defer stop()
			_ = chain
			start := time.Now()
			s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			// Sent at 0, 1 and 2 s; cut at 2.5 s, an instant the server
			// does not also send at.
			n, err := recvAll(s)
			if status.Code(err) != codes.DeadlineExceeded || n != 3 || time.Since(start) != 2500*time.Millisecond || f.calls.Load() != 1 {
				t.Errorf("hedged stream = %d messages and %v after %v and %d copies, want 3 and DEADLINE_EXCEEDED at 2.5s, one copy", n, err, time.Since(start), f.calls.Load())
			}
			if m := metrics(); m["meshless.timeout.calls attempt timed_out"] != 1 {
				t.Errorf("timeouts = %v, want one attempt timed_out", m)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			start = time.Now()
			s, err = client.StreamingOutputCall(ctx, sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			n, err = recvAll(s)
			if status.Code(err) != codes.DeadlineExceeded || n != 2 || time.Since(start) != 1500*time.Millisecond {
				t.Errorf("hedged stream = %d messages and %v after %v, want 2 and the caller's DEADLINE_EXCEEDED at 1.5s", n, err, time.Since(start))
			}
			if m := metrics(); m["meshless.timeout.calls attempt timed_out"] != 1 || m["meshless.timeout.calls overall timed_out"] != 0 {
				t.Errorf("timeouts = %v: the caller's deadline counted as meshless's", m)
			}
		})
	})

	// configuration.md, observe mode: a timeout leaves the stream's
	// deadline as it was, and counts a stream that ran as long or longer.
	t.Run("observe × the method's own perAttempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				if _, ok := s.Context().Deadline(); ok {
					return status.Error(codes.FailedPrecondition, "the stream has a deadline")
				}
				for range 5 {
					if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
						return err
					}
					time.Sleep(time.Second)
				}
				return nil
			})
			client, chain, metrics, stop := observed(t, f, "defaults:\n  mode: observe\n"+
				"services:\n  grpc.testing.TestService:\n    methods:\n      StreamingOutputCall: { timeout: { perAttempt: 3s } }\n")
			defer stop()
			e := &matrixEnv{f: f, client: client, chain: chain, metrics: metrics}
			if got := e.streams(context.Background(), 1); got["OK"] != 1 {
				t.Errorf("stream = %v, want OK after its 5s", got)
			}
			if m := metrics(); m["meshless.observe.decisions timeout time_out"] != 1 || m["meshless.timeout.calls attempt timed_out"] != 0 {
				t.Errorf("metrics = %v, want one would-be time_out and none done", m)
			}
		})
	})

	// grpc-streams.md: a half-open probe that is a stream is judged by its
	// first answer, so a recovered backend closes the breaker while the
	// probe — here a bidi call — stays open.
	t.Run("half-open probes × a long-lived bidi", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			var down atomic.Bool
			down.Store(true)
			release := make(chan struct{})
			bidi := func(s testgrpc.TestService_FullDuplexCallServer) error {
				if down.Load() {
					return status.Error(codes.Unavailable, "down")
				}
				if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
					return err
				}
				<-release
				return nil
			}
			f.bidi.Store(&bidi)
			client, chain, metrics, stop := observed(t, f, "defaults:\n  retry: { enabled: false }\n  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, permittedNumberOfCallsInHalfOpenState: 1, waitDurationInOpenState: 10s }\n")
			defer stop()
			e := &matrixEnv{f: f, client: client, chain: chain, metrics: metrics}
			e.bidis(context.Background(), 4)
			cb := e.breaker(t)
			if cb.State() != circuitbreaker.StateOpen {
				t.Fatalf("breaker %v after 4 failures", cb.State())
			}
			down.Store(false)
			time.Sleep(11 * time.Second)
			s, err := client.FullDuplexCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			if cb.State() != circuitbreaker.StateClosed {
				t.Errorf("breaker %v while the probe that answered stays open, want CLOSED", cb.State())
			}
			if got := e.streams(context.Background(), 1); got["OK"] != 1 {
				t.Errorf("a stream beside the open probe = %v", got)
			}
			close(release)
			if _, err := s.Recv(); err == nil {
				t.Error("the probe received a second message")
			}
		})
	})

	// grpc.md, Reload: a stream already open keeps the policies it started
	// with, and gives its permit back to its own bulkhead when it ends.
	t.Run("Reload while a stream is open × bulkhead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			release := make(chan struct{})
			var handled atomic.Int32
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				if handled.Add(1) == 1 {
					_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
					<-release
				}
				return s.Send(&testgrpc.StreamingOutputCallResponse{})
			})
			client, chain, metrics, stop := observed(t, f, "defaults:\n  bulkhead: { maxConcurrentCalls: 1 }\n")
			defer stop()
			e := &matrixEnv{f: f, client: client, chain: chain, metrics: metrics}
			s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
			reload(t, chain, "defaults:\n  bulkhead: { maxConcurrentCalls: 2 }\n  circuitBreaker: { mode: FORCED_OPEN }\n")
			if got := e.streams(context.Background(), 1); got["Unavailable CIRCUIT_OPEN"] != 1 {
				t.Errorf("a new stream after the reload = %v, want CIRCUIT_OPEN", got)
			}
			reload(t, chain, "defaults:\n  bulkhead: { maxConcurrentCalls: 2 }\n")
			if got := e.streams(context.Background(), 1); got["OK"] != 1 {
				t.Errorf("a new stream beside the open one, with 2 permits = %v", got)
			}
			close(release)
			if n, err := recvAll(s); err != nil || n != 1 {
				t.Errorf("the open stream = %d more messages and %v, want 1 and its end", n, err)
			}
			if b, ok := chain.Bulkhead(testService); !ok || b.Active() != 0 {
				t.Errorf("bulkhead active = %v after every stream ended", b.Active())
			}
		})
	})
}
