package grpcmw_test

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// replayServer records, per attempt, the messages each client-streaming or
// bidi call receives and the grpc-previous-rpc-attempts header it carries.
// Its script decides, per attempt (from 1), after how many received
// messages the attempt fails with UNAVAILABLE (-1: never). The bidi handler
// answers each message, except the last one it reads before failing.
type replayServer struct {
	testgrpc.UnimplementedTestServiceServer
	failAfter func(attempt int) int

	mu       sync.Mutex
	attempts [][]string // the payloads each attempt received, in order
	headers  [][]string
}

// begin records a new attempt and returns its number, from 1.
func (r *replayServer) begin(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, nil)
	r.headers = append(r.headers, md.Get(grpcmw.PreviousAttemptsHeader))
	return len(r.attempts)
}

func (r *replayServer) got(attempt int, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[attempt-1] = append(r.attempts[attempt-1], string(body))
}

func (r *replayServer) seen() (attempts, headers [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts), slices.Clone(r.headers)
}

func (r *replayServer) StreamingInputCall(s testgrpc.TestService_StreamingInputCallServer) error {
	n := r.begin(s.Context())
	fail, size := r.failAfter(n), 0
	for i := 0; ; i++ {
		if i == fail {
			return status.Error(codes.Unavailable, "down mid-stream")
		}
		in, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(size)})
		}
		if err != nil {
			return err
		}
		r.got(n, in.GetPayload().GetBody())
		size += len(in.GetPayload().GetBody())
	}
}

func (r *replayServer) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	n := r.begin(s.Context())
	fail := r.failAfter(n)
	for i := 0; ; i++ {
		if i == fail {
			return status.Error(codes.Unavailable, "down mid-stream")
		}
		in, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r.got(n, in.GetPayload().GetBody())
		if fail < 0 || i+1 < fail {
			if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
				return err
			}
		}
	}
}

func serveReplay(t *testing.T, r *replayServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

const streamRetries = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
retryThrottling: { enabled: false }
`

func payload(s string) *testgrpc.Payload { return &testgrpc.Payload{Body: []byte(s)} }

// A6 "Memory Management (Buffering)": a client-streaming call that fails
// before it commits is retried, its sent messages replayed in order, each
// exactly once per attempt, whether the failure came before or after the
// client sent them all. The retry carries grpc-previous-rpc-attempts.
func TestA6ClientStreamingIsRetriedWithItsMessagesReplayed(t *testing.T) {
	r := &replayServer{failAfter: func(attempt int) int {
		if attempt == 1 {
			return 2 // reads a and b, then fails: c may or may not be sent yet
		}
		return -1
	}}
	client, _, _ := dial(t, serveReplay(t, r), streamRetries)
	s, err := client.StreamingInputCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c"} {
		if err := s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(m)}); err != nil {
			t.Fatalf("Send(%s) = %v: a message kept for replay reports success", m, err)
		}
	}
	resp, err := s.CloseAndRecv()
	if err != nil || resp.GetAggregatedPayloadSize() != 3 {
		t.Fatalf("CloseAndRecv = %v, %v; want the second attempt's answer over a, b, c", resp, err)
	}
	attempts, headers := r.seen()
	if want := [][]string{{"a", "b"}, {"a", "b", "c"}}; !equalValues(attempts, want) {
		t.Fatalf("messages per attempt %q, want %q", attempts, want)
	}
	if want := [][]string{nil, {"1"}}; !equalValues(headers, want) {
		t.Fatalf("grpc-previous-rpc-attempts per attempt %q, want %q", headers, want)
	}
}

// The same for a bidi stream whose first attempt fails before answering:
// the caller gets each answer once, from the attempt that succeeded.
func TestA6BidiIsRetriedBeforeItsFirstResponse(t *testing.T) {
	r := &replayServer{failAfter: func(attempt int) int {
		if attempt < 3 {
			return 1 // reads a, then fails without answering
		}
		return -1
	}}
	client, _, _ := dial(t, serveReplay(t, r), streamRetries)
	s, err := client.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b"} {
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(m)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Recv = %v after %q", err, got)
		}
		got = append(got, string(resp.GetPayload().GetBody()))
	}
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("answers %q, want %q, each once", got, want)
	}
	attempts, headers := r.seen()
	if want := [][]string{{"a"}, {"a"}, {"a", "b"}}; !equalValues(attempts, want) {
		t.Fatalf("messages per attempt %q, want %q", attempts, want)
	}
	if want := [][]string{nil, {"1"}, {"2"}}; !equalValues(headers, want) {
		t.Fatalf("grpc-previous-rpc-attempts per attempt %q, want %q", headers, want)
	}
}

// A6: the call commits when its first response arrives: a failure after
// it is not retried.
func TestA6BidiCommitsOnItsFirstResponse(t *testing.T) {
	r := &replayServer{failAfter: func(int) int { return 2 }} // answers a, reads b, fails
	client, _, _ := dial(t, serveReplay(t, r), streamRetries)
	s, err := client.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload("a")})
	if resp, err := s.Recv(); err != nil || string(resp.GetPayload().GetBody()) != "a" {
		t.Fatalf("first answer %v, %v", resp, err)
	}
	_ = s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload("b")})
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("Recv after the failure = %v, want UNAVAILABLE", err)
	}
	if attempts, _ := r.seen(); len(attempts) != 1 {
		t.Fatalf("%d attempts, want 1: the call had committed", len(attempts))
	}
}

// A6: the call commits when a message would outgrow the per-call buffer;
// it is sent, and a later failure is not retried. Under the limit the same
// call is retried.
func TestA6StreamCommitsWhenItsMessagesOutgrowTheBuffer(t *testing.T) {
	for _, tt := range []struct {
		limit    int
		attempts int
	}{
		{limit: 3 * (5 + 5), attempts: 2}, // three 1-byte bodies: 5 bytes each, plus the 5-byte frame
		{limit: 3*(5+5) - 1, attempts: 1}, // the third message would not fit
	} {
		r := &replayServer{failAfter: func(attempt int) int {
			if attempt == 1 {
				return 3
			}
			return -1
		}}
		client, _, _ := dial(t, serveReplay(t, r), streamRetries, grpcmw.WithRetryBufferLimit(tt.limit))
		s, err := client.StreamingInputCall(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"a", "b", "c"} {
			_ = s.Send(&testgrpc.StreamingInputCallRequest{Payload: payload(m)})
		}
		_, err = s.CloseAndRecv()
		attempts, _ := r.seen()
		if len(attempts) != tt.attempts {
			t.Fatalf("limit %d: %d attempts (%q), want %d", tt.limit, len(attempts), attempts, tt.attempts)
		}
		if tt.attempts == 1 && status.Code(err) != codes.Unavailable {
			t.Fatalf("limit %d: err = %v, want the committed attempt's UNAVAILABLE", tt.limit, err)
		}
		if tt.attempts == 2 && (err != nil || !slices.Equal(attempts[1], []string{"a", "b", "c"})) {
			t.Fatalf("limit %d: err = %v, second attempt got %q", tt.limit, err, attempts[1])
		}
	}
	if _, err := grpcmw.New(nil, grpcmw.WithRetryBufferLimit(-1)); err == nil {
		t.Fatal("a negative buffer limit was accepted")
	}
}
