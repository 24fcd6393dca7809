package grpcmw_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
)

// Tests of gRFC A6 conformance (issue 11), each over loopback TCP, counting
// the attempts that reach the server.

// A6 "Pushback": a value that is negative or that does not parse means "do
// not retry"; so do several values (as grpc-go). Every such stop takes a
// throttle token, whatever the code.
func TestA6PushbackValues(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
retryThrottling: { maxTokens: 1000, tokenRatio: 1 }
`)
	for _, tt := range []struct {
		values []string
		calls  int32
	}{
		{[]string{"2"}, 3},
		{[]string{"002"}, 3}, // leading zeros read, as grpc-go reads them
		{[]string{"-1"}, 1},
		{[]string{"+5"}, 1},
		{[]string{"5.5"}, 1},
		{[]string{" 5"}, 1},
		{[]string{"5 "}, 1},
		{[]string{"5ms"}, 1},
		{[]string{"soon"}, 1},
		{[]string{"2147483648"}, 1}, // past int32
		{[]string{"2", "2"}, 1},     // several values
		{[]string{"2", "-1"}, 1},
	} {
		f.calls.Store(0)
		before := chain.Throttle().Tokens()
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			md := metadata.MD{}
			md[grpcmw.PushbackTrailer] = tt.values
			_ = grpc.SetTrailer(ctx, md)
			return nil, status.Error(codes.Unavailable, "busy")
		})
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("pushback %q: err = %v", tt.values, err)
		}
		if n := f.calls.Load(); n != tt.calls {
			t.Errorf("pushback %q: %d attempts at the server, want %d", tt.values, n, tt.calls)
		}
		// Every failed attempt takes one token; nothing gives any back.
		if spent := before - chain.Throttle().Tokens(); spent != float64(tt.calls) {
			t.Errorf("pushback %q: %v tokens taken, want %d", tt.values, spent, tt.calls)
		}
	}
	// A stop pushback on a code that is not retryable takes a token too; the
	// same code without it takes none.
	for _, tt := range []struct {
		trailer string
		spent   float64
	}{{"", 0}, {"-1", 1}} {
		before := chain.Throttle().Tokens()
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			if tt.trailer != "" {
				_ = setTrailer(ctx, grpcmw.PushbackTrailer, tt.trailer)
			}
			return nil, status.Error(codes.NotFound, "no such thing")
		})
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if spent := before - chain.Throttle().Tokens(); spent != tt.spent {
			t.Errorf("NOT_FOUND with pushback %q: %v tokens taken, want %v", tt.trailer, spent, tt.spent)
		}
	}
}

// The parser itself, for the values a server is unlikely to send.
func TestA6PushbackParser(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   time.Duration
		ok     bool
	}{
		{nil, 0, false},
		{[]string{"0"}, 0, true},
		{[]string{"250"}, 250 * time.Millisecond, true},
		{[]string{"2147483647"}, 2147483647 * time.Millisecond, true},
		{[]string{" 5"}, -1, true},
		{[]string{"5 "}, -1, true},
		{[]string{""}, -1, true},
		{[]string{"-0"}, -1, true},
		{[]string{"1e3"}, -1, true},
		{[]string{"5", "5"}, -1, true},
	} {
		md := metadata.MD{}
		if tt.values != nil {
			md[grpcmw.PushbackTrailer] = tt.values
		}
		if d, ok := grpcmw.Pushback(md); d != tt.want || ok != tt.ok {
			t.Errorf("pushback %q = %v, %v; want %v, %v", tt.values, d, ok, tt.want, tt.ok)
		}
	}
}

// A6 "Throttling": every RPC of the client moves the bucket, whatever its
// method: here UnaryCall does not retry (maxAttempts: 1), yet its failures
// drain the bucket and hold back the retries of StreamingOutputCall, and its
// successes refill it. NOT_FOUND neither gives nor takes.
func TestA6ThrottleIsMovedByAMethodWithoutRetry(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
services:
  grpc.testing.TestService:
    methods:
      UnaryCall: { retry: { maxAttempts: 1 } }
retryThrottling: { maxTokens: 4, tokenRatio: 1 }
`)
	th := chain.Throttle()
	// Not retried, each a failure: 4 → 1.
	f.setUnary(failing(codes.Unavailable))
	for range 3 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("UnaryCall made %d attempts in 3 calls, want 3 (it does not retry)", n)
	}
	if th.Tokens() != 1 {
		t.Fatalf("tokens = %v after 3 failures of a method without retry, want 1", th.Tokens())
	}
	// Business answers move nothing.
	f.setUnary(failing(codes.NotFound))
	for range 3 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if th.Tokens() != 1 {
		t.Fatalf("tokens = %v after NOT_FOUND answers, want 1 (neither given nor taken)", th.Tokens())
	}
	// The retrying method is throttled: its one failed attempt takes the
	// last token, and 0 is not above 2.
	streams := failingStreams(f)
	if n := streamAttempts(t, client, streams); n != 1 {
		t.Fatalf("StreamingOutputCall made %d attempts with the bucket at 1, want 1 (throttled)", n)
	}
	// Successes of the method without retry give back tokenRatio each:
	// 0 → 4. The next failing stream takes one (3, above 2: retry) and
	// another (2: stop).
	f.unary.Store(nil)
	for range 4 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if th.Tokens() != 4 {
		t.Fatalf("tokens = %v after 4 successes, want 4", th.Tokens())
	}
	if n := streamAttempts(t, client, streams); n != 2 {
		t.Fatalf("StreamingOutputCall made %d attempts with the bucket full again, want 2", n)
	}
}

// failingStreams scripts StreamingOutputCall to fail UNAVAILABLE before any
// response and returns its attempt counter.
func failingStreams(f *faultServer) *atomic.Int32 {
	n := new(atomic.Int32)
	f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		n.Add(1)
		return status.Error(codes.Unavailable, "down")
	})
	return n
}

// streamAttempts makes one server-streaming call and returns the attempts
// it made at the server.
func streamAttempts(t *testing.T, client testgrpc.TestServiceClient, counter *atomic.Int32) int32 {
	t.Helper()
	counter.Store(0)
	s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream = %v, want UNAVAILABLE", err)
	}
	return counter.Load()
}

// A6 "tokenRatio… Up to 3 decimal places are supported": 0.5466 is 0.546.
// With maxTokens 271 (threshold 135.5), an empty bucket refilled by 250
// successes holds 136.5 at 0.546 but 136.75 at 0.547 (rounded) and 136.65
// at 0.5466 (exact): the next failure leaves 135.5 (no retry) against 135.75
// or 135.65 (a retry). Two more successes bring it to 136.592 and the next
// failing call is retried once.
func TestA6TokenRatioKeepsThreeDecimals(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  adaptiveThrottling: { enabled: false }   # every failure must reach the server and the bucket
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
services:
  grpc.testing.TestService:
    methods:
      UnaryCall: { retry: { enabled: false } }
retryThrottling: { maxTokens: 271, tokenRatio: 0.5466 }
`)
	f.setUnary(failing(codes.Unavailable))
	for range 271 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if got := chain.Throttle().Tokens(); got != 0 {
		t.Fatalf("tokens = %v after 271 failures, want 0", got)
	}
	f.unary.Store(nil)
	for range 250 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := chain.Throttle().Tokens(); got != 136.5 {
		t.Fatalf("tokens = %v after 250 successes at 0.5466, want 136.5 (0.546 each)", got)
	}
	streams := failingStreams(f)
	if n := streamAttempts(t, client, streams); n != 1 {
		t.Fatalf("%d attempts at 136.5 tokens, want 1: 135.5 is not above 271/2", n)
	}
	for range 2 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if n := streamAttempts(t, client, streams); n != 2 {
		t.Fatalf("%d attempts at 136.592 tokens, want 2", n)
	}
}

// A6 "Exposed Retry Metadata": grpc-previous-rpc-attempts is absent on the
// first attempt and counts the attempts before it on each retry, for unary
// calls and streams.
func TestA6PreviousAttemptsHeader(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 4, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
retryThrottling: { enabled: false }
`)
	var mu sync.Mutex
	var seen [][]string
	// header records an attempt's header and returns the attempts so far.
	header := func(ctx context.Context) int {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, md.Get(grpcmw.PreviousAttemptsHeader))
		return len(seen)
	}
	// take returns the headers recorded and starts over.
	take := func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		got := seen
		seen = nil
		return got
	}
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if header(ctx) < 4 {
			return nil, status.Error(codes.Unavailable, "down")
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, want := take(), [][]string{nil, {"1"}, {"2"}, {"3"}}; !equalValues(got, want) {
		t.Fatalf("unary: headers per attempt %q, want %q", got, want)
	}
	// A value in the caller's own metadata goes out with the first attempt
	// as the caller wrote it, and is replaced, never repeated, on retries.
	ctx := metadata.AppendToOutgoingContext(t.Context(), grpcmw.PreviousAttemptsHeader, "7")
	if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, want := take(), [][]string{{"7"}, {"1"}, {"2"}, {"3"}}; !equalValues(got, want) {
		t.Fatalf("unary with the caller's value: headers per attempt %q, want %q", got, want)
	}
	f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		if header(s.Context()) < 3 {
			return status.Error(codes.Unavailable, "down")
		}
		return s.Send(&testgrpc.StreamingOutputCallResponse{})
	})
	s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := recvAll(s); got != 1 || err != nil {
		t.Fatalf("stream: %d responses, %v", got, err)
	}
	if got, want := take(), [][]string{nil, {"1"}, {"2"}}; !equalValues(got, want) {
		t.Fatalf("stream: headers per attempt %q, want %q", got, want)
	}
}

func equalValues(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// A reply that arrives after the overall deadline (here held back by an
// interceptor inside meshless's) fails the call with DEADLINE_EXCEEDED on
// every reading: the caller's error, status.Code and the call's error.type.
//
// In a synctest bubble, over memnet: on loopback TCP, a connection slower
// to set up than the 50ms (-race, busy cores) failed the call before any
// attempt reached the server.
func TestA6LateReplyIsDeadlineExceededEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setUnary(failing(codes.Unavailable))
		obs := new(resiliencetest.Observer)
		late := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			<-ctx.Done() // the reply is held until the overall deadline has passed
			return err
		}
		client, _, stop := inBubbleOf(t, f, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  timeout: { overall: 50ms }
`, []grpcmw.Option{grpcmw.WithObserver(obs)}, []grpc.DialOption{grpc.WithChainUnaryInterceptor(late)})
		defer stop()
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, timeout.ErrTimeout) {
			t.Fatalf("err = %v (code %v), want DEADLINE_EXCEEDED on every reading", err, status.Code(err))
		}
		var types []string
		for _, r := range obs.Recorded() {
			if r.Source.Kind == resilience.KindCall {
				types = append(types, r.Event.ErrorType)
			}
		}
		if len(types) != 1 || types[0] != "DEADLINE_EXCEEDED" {
			t.Fatalf("the call's error.type = %q, want DEADLINE_EXCEEDED", types)
		}
		if f.calls.Load() != 1 {
			t.Fatalf("%d attempts at the server, want 1", f.calls.Load())
		}
	})
}

// relayed returns a downstream meshless's rejection as a service passes it
// on: the status with its ErrorInfo.
func relayed(code codes.Code, reason string) error {
	st, _ := status.New(code, "downstream: "+reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: grpcmw.ErrorDomain})
	return st.Err()
}

// Issue 11 item 2 (ARCHITECTURE's classification): a relayed BULKHEAD_FULL or
// RATE_LIMITED is ignored by this hop's breaker and never retried, even with
// RESOURCE_EXHAUSTED listed in failureStatusCodes and retryableStatusCodes;
// it moves no throttle token. A relayed CIRCUIT_OPEN is a failure of the
// service that relayed it, even with UNAVAILABLE not listed, and is never
// retried either.
func TestA6RelayedRejectionsAreNeverRetriedAndClassifiedByReason(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 100, minimumNumberOfCalls: 100, failureStatusCodes: [RESOURCE_EXHAUSTED, INTERNAL] }
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [RESOURCE_EXHAUSTED, UNAVAILABLE] }
`)
	for _, tt := range []struct {
		code   codes.Code
		reason string
		failed int64
	}{
		{codes.ResourceExhausted, grpcmw.ReasonBulkheadFull, 0},
		{codes.ResourceExhausted, grpcmw.ReasonRateLimited, 0},
		{codes.ResourceExhausted, grpcmw.ReasonThrottled, 0},
		{codes.Unavailable, grpcmw.ReasonCircuitOpen, 1},
	} {
		f.calls.Store(0)
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			_ = setTrailer(ctx, grpcmw.PushbackTrailer, "-1") // moves no token on a rejection either
			return nil, relayed(tt.code, tt.reason)
		})
		var before int64
		if cb, ok := chain.Breaker(testService); ok {
			before = cb.Metrics().FailedCalls
		}
		tokens := 10.0
		if th := chain.Throttle(); th != nil {
			tokens = th.Tokens()
		}
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != tt.code || grpcmw.RejectionReason(err) != tt.reason {
			t.Fatalf("%s: err = %v, want the downstream's status unchanged", tt.reason, err)
		}
		if n := f.calls.Load(); n != 1 {
			t.Errorf("%s: %d attempts at the server, want 1 (never retried)", tt.reason, n)
		}
		cb, _ := chain.Breaker(testService)
		if got := cb.Metrics().FailedCalls - before; got != tt.failed {
			t.Errorf("%s: %d failures in this hop's breaker, want %d", tt.reason, got, tt.failed)
		}
		if got := chain.Throttle().Tokens(); got != tokens {
			t.Errorf("%s: tokens %v → %v, want no move", tt.reason, tokens, got)
		}
	}
	cb, _ := chain.Breaker(testService)
	if cb.Metrics().Calls != 1 {
		t.Fatalf("breaker counted %d calls, want 1: BULKHEAD_FULL and RATE_LIMITED are ignored", cb.Metrics().Calls)
	}
	// A local rejection is not an outgoing RPC: it moves no token either.
	cb.ForceOpen()
	f.calls.Store(0)
	tokens := chain.Throttle().Tokens()
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
		t.Fatalf("err = %v, want this client's CIRCUIT_OPEN", err)
	}
	if f.calls.Load() != 0 || chain.Throttle().Tokens() != tokens {
		t.Fatalf("a local rejection: %d server calls, tokens %v → %v; want 0 and no move", f.calls.Load(), tokens, chain.Throttle().Tokens())
	}
}

// Streams of a method without retries move the bucket too: a stream that
// ends OK gives tokenRatio back, one that fails with a retryable code, or
// cannot even be created, takes a token.
func TestA6ThrottleIsMovedByStreamsWithoutRetry(t *testing.T) {
	const cfg = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
retryThrottling: { maxTokens: 10, tokenRatio: 0.5 }
`
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, cfg)
	th := chain.Throttle()
	streams := failingStreams(f)
	for range 3 {
		if n := streamAttempts(t, client, streams); n != 1 {
			t.Fatalf("%d attempts for a stream without retries", n)
		}
	}
	if th.Tokens() != 7 {
		t.Fatalf("tokens = %v after 3 failed streams, want 7", th.Tokens())
	}
	f.stream.Store(nil)
	s, err := client.StreamingOutputCall(t.Context(), sendParams(2))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := recvAll(s); n != 2 || err != nil {
		t.Fatalf("stream: %d responses, %v", n, err)
	}
	if th.Tokens() != 7.5 {
		t.Fatalf("tokens = %v after a stream that ended OK, want 7.5", th.Tokens())
	}
	// Nothing listens at a closed listener's address: creating the stream
	// fails UNAVAILABLE.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close()
	deadClient, deadChain, _ := dial(t, dead, cfg)
	if _, err := deadClient.StreamingOutputCall(t.Context(), sendParams(1)); status.Code(err) != codes.Unavailable {
		t.Fatalf("creating a stream to nowhere = %v, want UNAVAILABLE", err)
	}
	if got := deadChain.Throttle().Tokens(); got != 9 {
		t.Fatalf("tokens = %v after a stream that could not be created, want 9", got)
	}
}
