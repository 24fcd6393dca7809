package grpcmw_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A caller that reads a retrying stream's Context (its peer, its end) and
// then receives: the context it holds is the context of the stream it
// receives from, as with grpc-go's own retry, whose Context commits the
// call. (Context returned the first attempt's context without committing;
// attempt 1 failed and was retried, so the caller's context was cancelled
// while it received attempt 2's responses, and any peer it read was
// attempt 1's.)
func TestARetryingStreamsContextIsTheStreamsItReceivesFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2, hold: time.Second}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
		defer stop()
		st := openHdr(t, client)
		ctx := st.Context()
		var msgs []string
		var err error
		for {
			m := new(testgrpc.StreamingOutputCallResponse)
			if err = st.RecvMsg(m); err != nil {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("received %q while the context the caller read is done (%v)", m.GetPayload().GetBody(), ctx.Err())
			}
			msgs = append(msgs, string(m.GetPayload().GetBody()))
		}
		if status.Code(err) != codes.Unavailable || len(msgs) != 0 || h.n.Load() != 1 {
			t.Fatalf("[%s], %v after %d attempts; want attempt 1's UNAVAILABLE after 1: Context committed the call", strings.Join(msgs, " "), err, h.n.Load())
		}
	})
}

// Context read while RecvMsg waits out a retry's backoff in another
// goroutine waits for the next attempt, as SendMsg and Header do (and as
// grpc-go's Context, which waits on the lock its stream holds through the
// backoff), and returns that attempt's context, live while the caller
// receives from it. (It returned the failed attempt's context, already
// cancelled, at once.)
func TestARetryingStreamsContextDuringABackoffIsTheNextAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2}
		failed := make(chan struct{}, 1)
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry(),
			grpc.WithChainStreamInterceptor(noteRecvFailure(failed)))
		defer stop()
		st := openHdr(t, client)
		first, checked := make(chan struct{}), make(chan struct{})
		var msgs []string
		var code codes.Code
		done := make(chan struct{})
		go func() {
			defer close(done)
			m := new(testgrpc.StreamingOutputCallResponse)
			if err := st.RecvMsg(m); err != nil {
				code = status.Code(err)
				close(first)
				<-checked
				return
			}
			msgs = append(msgs, string(m.GetPayload().GetBody()))
			close(first)
			<-checked
			rest, c := recvRest(st)
			msgs, code = append(msgs, rest...), c
		}()
		<-failed        // attempt 1's failure reached meshless
		synctest.Wait() // and RecvMsg waits out the backoff
		ctx := st.Context()
		<-first
		if err := ctx.Err(); err != nil {
			t.Errorf("the context Context returned during the backoff is done (%v) when the first response arrives", err)
		}
		close(checked)
		<-done
		if got := strings.Join(msgs, " "); got != "2/0 2/1" || code != codes.OK || h.n.Load() != 2 {
			t.Fatalf("[%s], %v after %d attempts; want attempt 2's responses, OK, after 2", got, code, h.n.Load())
		}
	})
}

// noteRecvFailure is an interceptor below meshless's that sends on failed
// when an attempt's RecvMsg returns an error other than io.EOF (it drops
// the note when failed is full).
func noteRecvFailure(failed chan<- struct{}) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &recvFailureStream{ClientStream: cs, failed: failed}, nil
	}
}

type recvFailureStream struct {
	grpc.ClientStream
	failed chan<- struct{}
}

func (s *recvFailureStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		select {
		case s.failed <- struct{}{}:
		default:
		}
	}
	return err
}

// A caller that reads a retrying stream's Trailer before the stream ends
// (gRPC says not to) commits the call, as with grpc-go's own retry, whose
// Trailer commits "to prevent races": the trailer it read is of the
// attempt whose status it gets. (The call was retried after it.) The
// attempts' streams below meshless answer Trailer without reading their
// transport, which grpc-go does not guard before the stream's end.
func TestARetryingStreamsTrailerCommitsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &hdrServer{ok: 2, hold: time.Second}
		client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry(),
			grpc.WithChainStreamInterceptor(earlyTrailer))
		defer stop()
		st := openHdr(t, client)
		_ = st.Trailer()
		msgs, code := recvRest(st)
		if code != codes.Unavailable || len(msgs) != 0 || h.n.Load() != 1 {
			t.Fatalf("[%s], %v after %d attempts; want attempt 1's UNAVAILABLE after 1: Trailer committed the call", strings.Join(msgs, " "), code, h.n.Load())
		}
	})
}

// earlyTrailer is an interceptor below meshless's whose streams answer
// Trailer with nothing, without reading the transport.
func earlyTrailer(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return noTrailerStream{cs}, nil
}

type noTrailerStream struct{ grpc.ClientStream }

func (noTrailerStream) Trailer() metadata.MD { return nil }
