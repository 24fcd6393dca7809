package grpcmw_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

const streamConfig = `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4 }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE] }
  bulkhead: { maxConcurrentCalls: 1 }
`

func sendParams(n int) *testgrpc.StreamingOutputCallRequest {
	req := &testgrpc.StreamingOutputCallRequest{}
	for i := range n {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: int32(i)})
	}
	return req
}

// recvAll reads a stream to its end and returns the messages and the error.
func recvAll(s testgrpc.TestService_StreamingOutputCallClient) (int, error) {
	n := 0
	for {
		_, err := s.Recv()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
		n++
	}
}

func TestStreamCreationFailure(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, strings.Replace(streamConfig, "minimumNumberOfCalls: 4", "minimumNumberOfCalls: 4, mode: FORCED_OPEN", 1))
	_, err := client.StreamingOutputCall(t.Context(), sendParams(1))
	if !errors.Is(err, circuitbreaker.ErrOpen) || grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen || f.calls.Load() != 0 {
		t.Fatalf("stream creation = %v, server calls %d; want the rejection and no call", err, f.calls.Load())
	}
}

func TestStreamFailureBeforeTheFirstResponseIsRetriedWithoutDuplicates(t *testing.T) {
	f := new(faultServer)
	f.setStream(func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		if f.calls.Load() == 1 {
			return status.Error(codes.Unavailable, "warming up")
		}
		for i := range req.GetResponseParameters() {
			if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{byte(i)}}}); err != nil {
				return err
			}
		}
		return nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, streamConfig)
	s, err := client.StreamingOutputCall(t.Context(), sendParams(3))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		msg, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		got = append(got, msg.GetPayload().GetBody()...)
	}
	if string(got) != "\x00\x01\x02" || f.calls.Load() != 2 {
		t.Fatalf("received %v over %d server calls, want 0,1,2 exactly once after one replay", got, f.calls.Load())
	}
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 1 {
		t.Fatalf("breaker %+v, want the failed and the good attempt", m)
	}
	if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
		t.Fatal("the stream's bulkhead permit was not given back")
	}
}

func TestStreamFailureAfterResponsesIsNotRetried(t *testing.T) {
	f := new(faultServer)
	f.setStream(func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
		_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
		return status.Error(codes.Unavailable, "lost the backend")
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, streamConfig)
	s, err := client.StreamingOutputCall(t.Context(), sendParams(5))
	if err != nil {
		t.Fatal(err)
	}
	n, err := recvAll(s)
	if n != 2 || status.Code(err) != codes.Unavailable || f.calls.Load() != 1 {
		t.Fatalf("got %d messages then %v over %d calls; want 2, UNAVAILABLE, no retry", n, err, f.calls.Load())
	}
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.FailedCalls != 1 {
		t.Fatalf("breaker %+v, want the stream's final status counted as a failure", m)
	}
	if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
		t.Fatal("permit not given back")
	}
}

func TestAbandonedStreamGivesItsPermitsBack(t *testing.T) {
	f := new(faultServer)
	hold := make(chan struct{})
	defer close(hold)
	f.setStream(func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
		select {
		case <-hold:
		case <-s.Context().Done():
		}
		return nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, streamConfig)

	// Cancelled: the context's end gives the permits back.
	ctx, cancel := context.WithCancel(t.Context())
	s, err := client.StreamingOutputCall(ctx, sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Recv()
	bh, _ := chain.Bulkhead(testService)
	if bh.Active() != 1 {
		t.Fatalf("an open stream holds %d permits, want 1", bh.Active())
	}
	cancel() // the caller walks away
	waitUntil(t, func() bool { return bh.Active() == 0 })

	// Dropped without a cancel: collected, and the permits come back.
	func() {
		s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = s.Recv()
	}()
	waitUntil(t, func() bool { runtime.GC(); return bh.Active() == 0 })
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.FailedCalls != 0 {
		t.Fatalf("abandoned streams counted as failures: %+v", m)
	}
}

// waitUntil polls a condition that a background goroutine the test does not
// control (a context's AfterFunc, a GC cleanup) makes true.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		runtime.Gosched()
		timeSleepMs()
	}
	t.Fatal("condition not reached")
}

// In a synctest bubble, over memnet: on loopback TCP under load, the
// connection's setup and the first message could take the method's whole
// 100ms, and the stream ended with no message.
func TestStreamTimeoutsComeOnlyFromTheMethodsOwnLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setStream(func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
			_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
			<-s.Context().Done()
			return s.Context().Err()
		})
		// The defaults' 50ms overall timeout must not cut streams; the
		// method's own perAttempt of 100ms does.
		client, _, stop := inBubble(t, f, `
defaults:
  timeout: { perAttempt: 20ms, overall: 50ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall: { timeout: { perAttempt: 100ms } }
`)
		defer stop()
		start := time.Now()
		s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
		if err != nil {
			t.Fatal(err)
		}
		n, err := recvAll(s)
		if n != 1 || status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %d messages and %v, want 1 and DEADLINE_EXCEEDED", n, err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("the stream was cut after %v, not at its method's own 100ms: an inherited timeout applied", d)
		}
	})
}

// A stream whose caller no longer refers to it is ended by a cleanup, so
// that its permits come back; one that a method is still using must not
// be: a Recv blocked while the garbage collector runs got CANCELLED (the
// cause of TestA6ThrottleIsMovedByAMethodWithoutRetry failing 7 times in
// 100 under -race).
func TestAStreamInUseIsNotCollected(t *testing.T) {
	for _, yaml := range []string{
		"defaults: { retry: { enabled: false } }",
		"defaults: { retry: { enabled: false }, hedging: { hedgingDelay: 1h } }", // a hedged stream
	} {
		t.Run(yaml, func(t *testing.T) {
			release := make(chan struct{})
			f := new(faultServer)
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				<-release
				return s.Send(&testgrpc.StreamingOutputCallResponse{})
			})
			addr, _ := serve(t, f)
			client, _, _ := dial(t, addr, yaml)
			s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for range 20 {
					runtime.GC() // the stream's caller holds it only through the Recv below
					runtime.Gosched()
				}
				close(release)
			}()
			if _, err := s.Recv(); err != nil {
				t.Fatalf("Recv = %v, want the response: the stream was ended while in use", err)
			}
		})
	}
}
