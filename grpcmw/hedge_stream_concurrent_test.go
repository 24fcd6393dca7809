package grpcmw_test

import (
	"context"
	"fmt"
	"io"
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

// Header called while RecvMsg runs the hedge on another goroutine (as
// gRPC allows: its Header waits for the header), and RecvMsg while Header
// runs it: the second waits for the hedge's decision. It went on at once,
// as if the stream had been decided: Header read the committed copy of a
// hedge that had none yet (a nil-pointer panic), and RecvMsg reported a
// clean end of a stream whose responses were still to come.
func TestAHedgedStreamsHeaderAndRecvMsgOnTwoGoroutines(t *testing.T) {
	for _, headerFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("headerFirst=", headerFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
					time.Sleep(10 * time.Millisecond) // before the hedging delay: one copy
					_ = ss.SendHeader(metadata.Pairs("copy", "1"))
					return ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte{1}}})
				})
				client, _, stop := inBubble(t, f, hedgeConfig)
				defer stop()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel() // ends the stream in the bubble
				st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var md metadata.MD
				var herr, rerr error
				var got *testgrpc.StreamingOutputCallResponse
				header := func() {
					defer func() {
						if p := recover(); p != nil {
							herr = fmt.Errorf("panic: %v", p)
						}
					}()
					md, herr = st.Header()
				}
				recv := func() { got, rerr = st.Recv() }
				first, second := recv, header
				if headerFirst {
					first, second = header, recv
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					first()
				}()
				synctest.Wait() // the first runs the hedge: its copy waits for the server
				second()
				<-done
				if herr != nil || fmt.Sprint(md.Get("copy")) != "[1]" {
					t.Errorf("Header() = %v, %v, want the copy's header", md, herr)
				}
				if rerr != nil || len(got.GetPayload().GetBody()) != 1 {
					t.Errorf("Recv() = %v, %v, want the copy's response", got, rerr)
				}
				if _, err := st.Recv(); err != io.EOF {
					t.Errorf("the second Recv() = %v, want io.EOF", err)
				}
			})
		})
	}
}

// A hedged stream whose one copy ended with a fatal code, the call's
// answer, read by Header and RecvMsg on two goroutines: the answer's
// header, trailer and peer are written into the caller's options once (both
// wrote them, at once: a data race under -race).
func TestAHedgedStreamsAnswerIsGivenOnceToHeaderAndRecvMsg(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			ss.SetTrailer(metadata.Pairs("copy", "1"))
			return status.Error(codes.InvalidArgument, "fatal")
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		for range 20 {
			var hdr, tr metadata.MD
			var p peer.Peer
			st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{},
				grpc.Header(&hdr), grpc.Trailer(&tr), grpc.Peer(&p))
			if err != nil {
				t.Fatal(err)
			}
			var herr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, herr = st.Header()
			}()
			_, err = st.Recv()
			<-done
			if status.Code(err) != codes.InvalidArgument || herr != nil {
				t.Fatalf("Recv() = %v, Header() = %v, want INVALID_ARGUMENT and no error", err, herr)
			}
			if fmt.Sprint(tr.Get("copy")) != "[1]" {
				t.Errorf("trailer %v, want the answer's", tr)
			}
		}
	})
}
