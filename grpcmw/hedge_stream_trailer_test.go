package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A hedged stream that ends before any response (a fatal code is the
// call's answer) gives the answering copy's trailer, as an unhedged stream
// and a hedged unary call (grpc.Trailer) do; Trailer() read only a
// committed copy's stream, and none is committed.
func TestAHedgedStreamFatalAnswerKeepsTrailer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			ss.SetTrailer(metadata.Pairs("why", "quota"))
			return status.Error(codes.InvalidArgument, "fatal")
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		var tr metadata.MD
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{}, grpc.Trailer(&tr))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recvBodies(st); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v, want INVALID_ARGUMENT", err)
		}
		if got := st.Trailer().Get("why"); len(got) != 1 {
			t.Errorf("Trailer() = %v, want the answering copy's why=quota", st.Trailer())
		}
		if got := tr.Get("why"); len(got) != 1 {
			t.Errorf("grpc.Trailer option = %v, want the answering copy's why=quota", tr)
		}
	})
}

// The caller's grpc.Header and grpc.Trailer get the answering copy's
// values, never a loser's. Every copy was given the caller's options, and
// grpc-go writes them when each copy's stream finishes — a cancelled
// loser's too, after the answer, from its own goroutine: copy 1 (its header
// sent, then slow) lost to copy 2's fatal answer with a trailer, and the
// caller's header was the loser's, its trailer overwritten by the loser's.
func TestAHedgedStreamLoserLeavesTheCallersHeaderAndTrailer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		var n int32
		f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			n++ // the copies are 50ms apart in the bubble
			if n == 1 {
				_ = ss.SendHeader(metadata.Pairs("copy", "1"))
				<-ss.Context().Done()
				return ss.Context().Err()
			}
			ss.SetTrailer(metadata.Pairs("why", "quota"))
			return status.Error(codes.InvalidArgument, "fatal")
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		var hdr, tr metadata.MD
		st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := recvBodies(st); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("got %v, want copy 2's INVALID_ARGUMENT", err)
		}
		synctest.Wait() // the loser's stream has finished
		if got := hdr.Get("copy"); len(got) != 0 {
			t.Errorf("header %v: the losing copy's", hdr)
		}
		if got := tr.Get("why"); len(got) != 1 {
			t.Errorf("trailer %v, want the answering copy's why=quota", tr)
		}
	})
}
