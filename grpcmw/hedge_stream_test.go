package grpcmw_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// streamScript: the n-th stream (from 1) waits delays[n-1] before its first
// response, then sends count responses whose payload is the stream's
// number, then ends with code (OK when unset); it counts cancellations.
type streamScript struct {
	delays    []time.Duration
	codes     []codes.Code
	count     int
	n         atomic.Int32
	cancelled atomic.Int32
}

func (s *streamScript) handler(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	n := int(s.n.Add(1))
	i := min(n, len(s.delays)) - 1
	select {
	case <-time.After(s.delays[i]):
	case <-ss.Context().Done():
		s.cancelled.Add(1)
		return ss.Context().Err()
	}
	if s.codes != nil && s.codes[i] != codes.OK {
		return status.Error(s.codes[i], "scripted")
	}
	for range s.count {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{byte(n)}}}); err != nil {
			return err
		}
	}
	return nil
}

// recvBodies reads a stream to its end and returns the first byte of each
// response's payload.
func recvBodies(st testgrpc.TestService_StreamingOutputCallClient) ([]byte, error) {
	var out []byte
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.GetPayload().GetBody()[0])
	}
}

// A server-streaming call whose first stream is slow to answer: the second
// copy is committed at its first response, the caller reads it whole, the
// first is cancelled at the server, and every permit is back at the end.
func TestHedgingServerStreamCommitsAtTheFirstResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{time.Second, 10 * time.Millisecond}, count: 3}
		f := new(faultServer)
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvBodies(st)
		if err != nil || string(got) != "\x02\x02\x02" || time.Since(start) != 60*time.Millisecond {
			t.Fatalf("got %v, %v after %v; want stream 2's three responses at 60ms", got, err, time.Since(start))
		}
		synctest.Wait()
		if s.n.Load() != 2 || s.cancelled.Load() != 1 {
			t.Fatalf("server: %d streams, %d cancelled; want 2 and 1", s.n.Load(), s.cancelled.Load())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held after the stream", bh.Active())
		}
	})
}

// A fatal code before any response ends the call; a non-fatal one sends the
// next copy at once.
func TestHedgingServerStreamBeforeTheFirstResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
			codes: []codes.Code{codes.Unavailable, codes.InvalidArgument, codes.OK}, count: 1}
		f := new(faultServer)
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		start := time.Now()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = recvBodies(st)
		if status.Code(err) != codes.InvalidArgument || time.Since(start) != 20*time.Millisecond || s.n.Load() != 2 {
			t.Fatalf("got %v after %v with %d streams; want stream 2's INVALID_ARGUMENT at 20ms", err, time.Since(start), s.n.Load())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}

// Once committed, a failure is the caller's: nothing is hedged after the
// first response.
func TestHedgingServerStreamIsNotHedgedAfterTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		var n atomic.Int32
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			n.Add(1)
			if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{1}}}); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "mid-stream")
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := recvBodies(st)
		if len(got) != 1 || status.Code(err) != codes.Unavailable || n.Load() != 1 {
			t.Fatalf("got %v, %v with %d streams; want one response, then UNAVAILABLE, and one stream", got, err, n.Load())
		}
	})
}

// A caller that cancels a hedged stream, before or after the commit, gets
// every permit back.
func TestHedgingServerStreamCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{time.Hour}, count: 1}
		f := new(faultServer)
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
		defer cancel()
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = recvBodies(st)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %v, want DEADLINE_EXCEEDED", err)
		}
		synctest.Wait()
		if s.n.Load() != 3 || s.cancelled.Load() != 3 {
			t.Fatalf("server: %d streams, %d cancelled; want 3 and 3", s.n.Load(), s.cancelled.Load())
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}

// After the commit, a caller that stops reading and cancels gets the
// committed copy's permits back.
func TestHedgingServerStreamCancelledAfterTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			if err := ss.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
				return err
			}
			<-ss.Context().Done()
			return ss.Context().Err()
		})
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		bh, _ := chain.Bulkhead(testService)
		if bh.Active() != 1 {
			t.Fatalf("%d permits held by the committed stream, want 1", bh.Active())
		}
		cancel()
		synctest.Wait()
		if bh.Active() != 0 {
			t.Fatalf("%d permits held after the caller cancelled", bh.Active())
		}
		// (Using st here also keeps it reachable: a stream collected inside
		// the bubble would be finished by its cleanup, outside it.)
		if _, err := st.Recv(); status.Code(err) != codes.Canceled {
			t.Fatalf("Recv after cancel: %v, want CANCELLED", err)
		}
	})
}

// Over loopback TCP, without timing: the first stream never answers, the
// second does; the caller reads the second, and the first is cancelled at
// the server.
func TestHedgingServerStreamOverTCP(t *testing.T) {
	f := new(faultServer)
	var n atomic.Int32
	cancelled := make(chan struct{})
	f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
		if n.Add(1) == 1 {
			<-ss.Context().Done()
			close(cancelled)
			return ss.Context().Err()
		}
		for range 2 {
			if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{2}}}); err != nil {
				return err
			}
		}
		return nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  hedging: { maxAttempts: 2, hedgingDelay: 1ms }
`)
	st, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := recvBodies(st)
	if err != nil || string(got) != "\x02\x02" {
		t.Fatalf("got %v, %v; want the second stream's two responses", got, err)
	}
	select {
	case <-cancelled:
	case <-t.Context().Done():
		t.Fatal("the losing stream was never cancelled at the server")
	}
	if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 || n.Load() != 2 {
		t.Fatalf("%d permits held, %d streams; want 0 and 2", bh.Active(), n.Load())
	}
}

// hedgingDelay 0s: every copy opens at once and several may get a first
// response; only the committed one keeps its stream and permits.
func TestHedgingServerStreamAllCopiesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		var n atomic.Int32
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			n.Add(1)
			if err := ss.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
				return err
			}
			<-ss.Context().Done()
			return ss.Context().Err()
		})
		client, chain, stop := inBubble(t, f, `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  hedging: { maxAttempts: 3, hedgingDelay: 0s }
`)
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		bh, _ := chain.Bulkhead(testService)
		// A copy cancelled before its stream reached the server is not seen
		// there: 1 to 3 streams arrive.
		if bh.Active() != 1 || n.Load() < 1 || n.Load() > 3 {
			t.Fatalf("%d permits held with %d streams at the server, want 1 (the committed stream's)", bh.Active(), n.Load())
		}
		cancel()
		synctest.Wait()
		if _, err := st.Recv(); status.Code(err) != codes.Canceled || bh.Active() != 0 {
			t.Fatalf("after cancel: %v with %d permits held", err, bh.Active())
		}
	})
}
