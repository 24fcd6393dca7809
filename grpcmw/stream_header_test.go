package grpcmw_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// hdrServer answers StreamingOutputCall and FullDuplexCall by attempt (from
// 1): an attempt before ok fails with UNAVAILABLE, in a Trailers-Only
// response, or, with headersFirst, after sending its header.
// Attempt ok (and later) sends the header "attempt: n", two responses
// "n/0", "n/1" (bidi: "n/<each request>" after the client closes), and the
// trailer "attempt: n". A failing attempt waits hold (the bubble's time)
// before it fails, after its header if it sends one, so that two client
// goroutines both meet it.
type hdrServer struct {
	testgrpc.UnimplementedTestServiceServer
	ok           int
	headersFirst bool
	hold         time.Duration
	n            atomic.Int32
}

func (h *hdrServer) begin(ctx context.Context) (int, error) {
	n := int(h.n.Add(1))
	md := metadata.Pairs("attempt", strconv.Itoa(n))
	if n >= h.ok {
		return n, grpc.SetHeader(ctx, md)
	}
	if h.headersFirst {
		if err := grpc.SendHeader(ctx, md); err != nil {
			return n, err
		}
	}
	time.Sleep(h.hold)
	return n, status.Errorf(codes.Unavailable, "attempt %d down", n)
}

func (h *hdrServer) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
	n, err := h.begin(s.Context())
	if err != nil {
		return err
	}
	for i := range 2 {
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: payload(fmt.Sprintf("%d/%d", n, i))}); err != nil {
			return err
		}
	}
	return grpc.SetTrailer(s.Context(), metadata.Pairs("attempt", strconv.Itoa(n)))
}

func (h *hdrServer) FullDuplexCall(s testgrpc.TestService_FullDuplexCallServer) error {
	n, err := h.begin(s.Context())
	if err != nil {
		return err
	}
	var in []string
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		in = append(in, string(m.GetPayload().GetBody()))
	}
	for _, b := range in {
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{Payload: payload(fmt.Sprintf("%d/%s", n, b))}); err != nil {
			return err
		}
	}
	return grpc.SetTrailer(s.Context(), metadata.Pairs("attempt", strconv.Itoa(n)))
}

// hdrSeen is what the caller saw.
type hdrSeen struct {
	header   string // Header's "attempt" value, "nil" for no header, with its error if any
	msgs     string
	code     codes.Code // the final status (OK for io.EOF)
	trailer  string     // Trailer's "attempt" value after the end
	attempts int32
}

func (s hdrSeen) String() string {
	return fmt.Sprintf("header %s, msgs [%s], %v, trailer %q, %d attempts", s.header, s.msgs, s.code, s.trailer, s.attempts)
}

func headerValue(md metadata.MD, err error) string {
	switch {
	case err != nil:
		return "error " + status.Code(err).String()
	case md == nil:
		return "nil"
	}
	return strings.Join(md.Get("attempt"), ",")
}

// recvRest reads st to its end.
func recvRest(st grpc.ClientStream) (msgs []string, code codes.Code) {
	for {
		m := new(testgrpc.StreamingOutputCallResponse)
		err := st.RecvMsg(m)
		if err == io.EOF {
			return msgs, codes.OK
		}
		if err != nil {
			return msgs, status.Code(err)
		}
		msgs = append(msgs, string(m.GetPayload().GetBody()))
	}
}

const meshlessStreamRetry = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 10ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
retryThrottling: { enabled: false }
`

// openHdr opens a server-streaming call on a meshless client.
func openHdr(t *testing.T, client testgrpc.TestServiceClient) grpc.ClientStream {
	t.Helper()
	st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A caller that asks for the header before it receives, on a retrying
// stream whose first attempt fails at once (a Trailers-Only UNAVAILABLE):
// as with grpc-go's own retry, Header retries the call and returns the
// header of the attempt that answers. (It returned the failed attempt's
// nil header, though RecvMsg then retried and delivered attempt 2's
// responses.)
func TestARetryingStreamsHeaderRetriesATrailersOnlyFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
		defer stop()
		st := openHdr(t, client)
		hdr := headerValue(st.Header())
		msgs, code := recvRest(st)
		if got := strings.Join(msgs, " "); hdr != "2" || got != "2/0 2/1" || code != codes.OK || h.n.Load() != 2 {
			t.Fatalf("Header %s, then [%s], %v after %d attempts; want attempt 2's header and responses, OK, after 2", hdr, got, code, h.n.Load())
		}
	})
}

// The same when the attempts run out: Header returns no header and no
// error (grpc-go's: the status is RecvMsg's), and RecvMsg the last
// attempt's UNAVAILABLE, without another attempt.
func TestARetryingStreamsHeaderWhenTheAttemptsRunOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 99}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
		defer stop()
		st := openHdr(t, client)
		hdr := headerValue(st.Header())
		msgs, code := recvRest(st)
		if hdr != "nil" || len(msgs) != 0 || code != codes.Unavailable || h.n.Load() != 3 {
			t.Fatalf("Header %s, then %v, %v after %d attempts; want no header, UNAVAILABLE after 3", hdr, msgs, code, h.n.Load())
		}
	})
}

// A Header beside a RecvMsg that is retrying an attempt which sent its
// header and then failed (RecvMsg read the failure first: the header never
// reached the caller, so the call had not committed, docs/grpc.md "when
// retries stop for a stream"): Header waits for the retry and returns the
// next attempt's header, so the caller's header and responses come from
// one attempt. (Header returned attempt 1's header, committing the call
// too late to stop the retry, and RecvMsg delivered attempt 2's responses.)
func TestARetryingStreamsHeaderDuringARetryIsTheNextAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2, headersFirst: true}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
		defer stop()
		st := openHdr(t, client)
		var msgs []string
		var code codes.Code
		done := make(chan struct{})
		go func() {
			defer close(done)
			msgs, code = recvRest(st)
		}()
		synctest.Wait() // RecvMsg read attempt 1's failure and waits out the backoff
		hdr := headerValue(st.Header())
		<-done
		if got := strings.Join(msgs, " "); hdr != "2" || got != "2/0 2/1" || code != codes.OK || h.n.Load() != 2 {
			t.Fatalf("Header %s beside [%s], %v after %d attempts; want attempt 2's header and responses, OK, after 2", hdr, got, code, h.n.Load())
		}
	})
}

// A message that outgrows the retry buffer, sent while RecvMsg waits out a
// retry's backoff, goes to the next attempt after the kept ones, as with
// grpc-go's own retry, and commits the call there. (It went to the failed
// attempt and committed the call, dropping the kept message, and the retry
// went on: the next attempt had nothing to replay, neither the kept
// message nor the CloseSend, and the server waited for them in vain.)
func TestARetryingStreamsSendDuringItsBackoffGoesToTheNextAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2}
		client, _, stop := inBubbleOf(t, h, meshlessStreamRetry,
			[]grpcmw.Option{grpcmw.WithRetryBufferLimit(32)}, []grpc.DialOption{grpc.WithDisableRetry()})
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload("a")}); err != nil {
			t.Fatal(err)
		}
		var msgs []string
		var code codes.Code
		done := make(chan struct{})
		go func() {
			defer close(done)
			msgs, code = recvRest(st)
		}()
		synctest.Wait() // RecvMsg read attempt 1's failure and waits out the backoff
		b := strings.Repeat("b", 64)
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: payload(b)}); err != nil {
			t.Errorf("Send of the message past the buffer = %v; want it sent on attempt 2", err)
		}
		_ = st.CloseSend()
		select {
		case <-done:
		case <-time.After(time.Minute): // the bubble's time: all else is blocked for good
			cancel() // end the stream inside the bubble
			<-done
		}
		if got := strings.Join(msgs, " "); got != "2/a 2/"+b || code != codes.OK || h.n.Load() != 2 {
			t.Fatalf("[%s], %v after %d attempts; want attempt 2's echo of both messages, OK, after 2", got, code, h.n.Load())
		}
	})
}

// A bidi call that closes its sending side without sending anything, and
// whose attempt fails before it commits: the retry replays the CloseSend,
// and the server's answer ends the call. (The CloseSend was replayed only
// with kept messages: the next attempt never saw the half-close, and the
// server waited for it in vain.)
func TestARetryingStreamReplaysACloseSendWithoutMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		var msgs []string
		var code codes.Code
		done := make(chan struct{})
		go func() {
			defer close(done)
			msgs, code = recvRest(st)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // the bubble's time: all else is blocked for good
			cancel() // end the stream inside the bubble
			<-done
		}
		if hdr := headerValue(st.Header()); len(msgs) != 0 || code != codes.OK || hdr != "2" || h.n.Load() != 2 {
			t.Fatalf("header %s, [%s], %v after %d attempts; want attempt 2's header and OK, after 2", hdr, strings.Join(msgs, " "), code, h.n.Load())
		}
	})
}
