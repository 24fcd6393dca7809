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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The caller's context ends after copy 1 got its first response but before
// the hedge returns (it waits for copy 2, slow to notice the cancel): copy
// 1's stream is ended by the cancellation, and gRPC writes its header,
// trailer and peer from its own goroutine. Copy 1 is then no answer of the
// call: the caller's options and Trailer() are not read from it (they
// were, a data race under -race).
func TestAHedgedStreamCancelledWhileItsHedgeEndsReadsNoCancelledCopy(t *testing.T) {
	for _, withOpts := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := new(faultServer)
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
				_ = ss.SendHeader(metadata.Pairs("copy", "1"))
				time.Sleep(100 * time.Millisecond)
				_ = ss.Send(&testgrpc.StreamingOutputCallResponse{})
				<-ss.Context().Done()
				return ss.Context().Err()
			})
			var opened atomic.Int32
			slowCopy2 := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if opened.Add(1) == 2 {
					time.Sleep(250 * time.Millisecond) // copy 2 notices the hedge's cancel late
					return nil, ctx.Err()
				}
				return streamer(ctx, desc, cc, method, opts...)
			}
			client, _, stop := inBubbleDial(t, f, hedgeConfig, grpc.WithChainStreamInterceptor(slowCopy2))
			defer stop()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var hdr, tr metadata.MD
			var p peer.Peer
			var opts []grpc.CallOption
			if withOpts {
				opts = []grpc.CallOption{grpc.Header(&hdr), grpc.Trailer(&tr), grpc.Peer(&p)}
			}
			st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			// Copy 1 answers at 100ms, copy 2 is sent at 50ms and returns at
			// 300ms; the caller gives up at 150ms, while the hedge waits.
			time.AfterFunc(150*time.Millisecond, cancel)
			err = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
			if status.Code(err) != codes.Canceled { // a bare context.Canceled is UNKNOWN to status.Code
				t.Errorf("RecvMsg = %v, want the caller's cancel", err)
			}
			if tr := st.Trailer(); tr != nil {
				t.Errorf("Trailer() = %v, want none: the cancelled copy is no answer", tr)
			}
			if hdr != nil || tr != nil {
				t.Errorf("the caller's header %v and trailer %v were written from a cancelled copy", hdr, tr)
			}
		})
	}
}

// A hedged stream opened on a context that has already ended: the watch
// that ends the stream runs at once, on its own goroutine, and must not
// read the stream's state before it is set (it read the unset stop func:
// a data race under -race, and a nil-pointer panic that crashed the
// process when the watch won). The caller gets the context's status.
func TestAHedgedStreamOpenedOnAnEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		s := &streamScript{delays: []time.Duration{0}, count: 1}
		f.setStream(s.handler)
		client, chain, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		for range 50 {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			if err == nil {
				err = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
			}
			if status.Code(err) != codes.Canceled {
				t.Fatalf("got %v, want CANCELLED", err)
			}
		}
		synctest.Wait()
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}
