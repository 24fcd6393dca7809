package grpcmw_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// earlyAnswer is a bidi server whose first attempt fails at once and whose
// second answers at once, once, and ends OK without reading a message.
type earlyAnswer struct {
	testgrpc.UnimplementedTestServiceServer
	calls atomic.Int32
}

func (e *earlyAnswer) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	if e.calls.Add(1) == 1 {
		return status.Error(codes.Unavailable, "warming up")
	}
	if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: payload("early")}); err != nil {
		return err
	}
	return nil
}

// A retry's replay that meets io.EOF (the new attempt already
// ended: here the server answered and closed before reading the replayed
// messages, which outgrow the stream's 64 KiB flow-control window) becomes
// the current attempt: the caller receives the server's answer and OK (it
// read the status with RecvMsg(new(struct{})) before, whose decode of the
// response failed: the answer was lost and the caller got INTERNAL).
func TestAReplayCutShortKeepsTheServersAnswer(t *testing.T) {
	e := new(earlyAnswer)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A fixed 64 KiB window: the replay must block until the server ends.
	srv := grpc.NewServer(grpc.InitialWindowSize(1<<16), grpc.InitialConnWindowSize(1<<16))
	testgrpc.RegisterTestServiceServer(srv, e)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	client, _, _ := dial(t, lis.Addr().String(), streamRetries)

	s, err := client.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 70_000) // 3 of them: 210 kB, within the 256 KiB replay buffer
	for range 3 {
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(big)}); err != nil {
			t.Fatalf("Send = %v", err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("Recv = %v after %d server calls; want the second attempt's answer %q", err, e.calls.Load(), "early")
	}
	if got := string(resp.GetPayload().GetBody()); got != "early" {
		t.Fatalf("Recv = %q, want %q", got, "early")
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("second Recv = %v, want io.EOF", err)
	}
}

// When the caller's context ends while RecvMsg sleeps a retry's
// backoff, both the context's watcher (finishLocked → endLocked) and
// RecvMsg itself end the call: its event is recorded once (it was twice:
// Call.End, "call it once", ran from both).
func TestACancelDuringABackoffEndsTheCallOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			if src.Kind != resilience.KindCall {
				return nil
			}
			return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventCall {
					calls.Add(1)
				}
			})
		})
		f := new(faultServer)
		f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
			return status.Error(codes.Unavailable, "down")
		})
		client, _, stop := inBubbleWith(t, f, `
defaults:
  circuitBreaker: { enabled: false }
  adaptiveThrottling: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1h, maxBackoff: 1h, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
retryThrottling: { enabled: false }
`, []grpcmw.Option{grpcmw.WithObserver(obs)})
		defer stop()
		// Which of the two goroutines that notice the cancel takes the lock
		// first is up to the scheduler; the double End needs the watcher
		// first, so the scenario runs 30 times.
		const streams = 30
		for i := range streams {
			ctx, cancel := context.WithCancel(t.Context())
			s, err := client.StreamingOutputCall(ctx, sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := recvAll(s); done <- err }()
			synctest.Wait() // RecvMsg sleeps the 1h backoff
			if n := f.calls.Load(); n != int32(i+1) {
				t.Fatalf("%d server calls before the backoff, want %d", n, i+1)
			}
			cancel()
			<-done
			synctest.Wait()
		}
		if n := calls.Load(); n != streams {
			t.Fatalf("%d streams cancelled in their backoff recorded %d call events, want one each", streams, n)
		}
	})
}

// A panic below the interceptor while RecvMsg opens a retry's
// attempt (open runs with the stream's lock held) releases the lock on its
// way up: held, Context, Header, CloseSend and SendMsg would block forever,
// and the context watcher (and the garbage collector's cleanup goroutine)
// on the stream's end. The creation path is
// TestIssue9ClientStreamPanicGivesPermitsBack.
func TestAPanicOnARetryLeavesTheStreamUnlocked(t *testing.T) {
	f := new(faultServer)
	f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	})
	addr, _ := serve(t, f)
	cfg, err := grpcmw.ParseConfig([]byte(streamRetries))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var opened atomic.Int32
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if opened.Add(1) == 2 {
			panic("inner stream interceptor")
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	var (
		mu   sync.Mutex
		ours grpc.ClientStream
	)
	outer := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		mu.Lock()
		ours = cs
		mu.Unlock()
		return cs, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(outer, chain.StreamClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := client.StreamingOutputCall(ctx, sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	if r := recovered(func() { _, _ = s.Recv() }); r != "inner stream interceptor" {
		t.Fatalf("recovered %v, want the inner interceptor's panic", r)
	}
	mu.Lock()
	cs := ours
	mu.Unlock()
	if grpcmw.StreamLockHeld(cs) {
		grpcmw.UnlockStream(cs) // so that the rest of the package runs
		t.Fatal("after a recovered panic in a retry's attempt the stream's lock is still held: " +
			"Context/Header/CloseSend/SendMsg and the context watcher would block forever")
	}
}
