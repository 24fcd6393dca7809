package grpcmw_test

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// A caller that reads a hedged stream's Context before the hedge has
// committed a copy (before its first Recv, or while that Recv runs the
// hedge in another goroutine) gets the stream's own context, and the
// hedge goes on: unlike an unhedged stream's, that Context does not commit
// the call, since no copy has answered and committing to one would cancel
// the copies that may still win (gRFC A6 commits a hedged call at its
// first response only). What the unhedged stream's commit is for holds all
// the same: the context the caller holds is live while it receives the
// committed copy's responses, though copy 1 lost, and ends when the stream
// ends. It carries no peer (no copy is the call's yet); the Context read
// after the commit is the committed copy's, with its peer
// (docs/grpc-streams.md).
func TestAHedgedStreamsContextBeforeTheCommitIsTheStreams(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := "before the first Recv"
		if during {
			name = "while the first Recv runs the hedge"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &streamScript{delays: []time.Duration{time.Second, 10 * time.Millisecond}, count: 3}
				f := new(faultServer)
				f.setStream(s.handler)
				client, _, stop := inBubble(t, f, hedgeConfig)
				defer stop()
				start := time.Now()
				st, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var ctx context.Context
				first := make(chan error, 1)
				var r *testgrpc.StreamingOutputCallResponse
				if during {
					go func() {
						var err error
						r, err = st.Recv()
						first <- err
					}()
					synctest.Wait() // the hedge runs: copy 1 is sent and waits for its answer
					if n := s.n.Load(); n != 1 {
						t.Fatalf("%d copies sent when Context was read; want the hedge under way with 1", n)
					}
					ctx = st.Context()
				} else {
					ctx = st.Context()
					r, err = st.Recv()
					first <- err
				}
				if _, ok := peer.FromContext(ctx); ok {
					t.Errorf("the context read before the commit has a peer; no copy is the call's yet")
				}
				if err := <-first; err != nil {
					t.Fatalf("first Recv: %v", err)
				}
				got := []byte{r.GetPayload().GetBody()[0]}
				if p, ok := peer.FromContext(st.Context()); !ok || p.Addr == nil {
					t.Errorf("the context read after the commit has no peer; want the committed copy's")
				}
				for {
					if err := ctx.Err(); err != nil {
						t.Errorf("receiving while the context read before the commit is done (%v)", err)
					}
					r, err := st.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("Recv: %v", err)
					}
					got = append(got, r.GetPayload().GetBody()[0])
				}
				if string(got) != "\x02\x02\x02" || s.n.Load() != 2 || time.Since(start) != 60*time.Millisecond {
					t.Fatalf("got %v from %d copies after %v; want copy 2's three responses at 60ms: Context must not commit copy 1", got, s.n.Load(), time.Since(start))
				}
				if ctx.Err() == nil {
					t.Errorf("the context read before the commit is live after the stream ended")
				}
				synctest.Wait() // copy 1's cancellation reached the server
				if c := s.cancelled.Load(); c != 1 {
					t.Errorf("%d copies cancelled at the server; want copy 1", c)
				}
			})
		})
	}
}

// A caller that reads a hedged stream's Trailer before the stream ends
// (gRPC says not to) gets none while no copy has answered, and the hedge
// goes on: the trailer the caller reads after the end is the committed
// copy's, never the loser's. (Trailer does not commit the call, unlike an
// unhedged stream's: there is no trailer of the call to give before a copy
// has answered, and committing to copy 1 would have cancelled copy 2.)
func TestAHedgedStreamsTrailerBeforeTheEndDoesNotCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &streamScript{delays: []time.Duration{time.Second, 10 * time.Millisecond}, count: 2}
		f := new(faultServer)
		f.setStream(func(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
			ss.SetTrailer(metadata.Pairs("copy", string('0'+byte(s.n.Load()+1))))
			return s.handler(req, ss)
		})
		client, _, stop := inBubble(t, f, hedgeConfig)
		defer stop()
		st, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if tr := st.Trailer(); tr != nil {
			t.Errorf("Trailer() before any copy answered = %v, want none", tr)
		}
		got, err := recvBodies(st)
		if err != nil || string(got) != "\x02\x02" || s.n.Load() != 2 {
			t.Fatalf("got %v, %v from %d copies; want copy 2's two responses: Trailer must not commit copy 1", got, err, s.n.Load())
		}
		if tr := st.Trailer().Get("copy"); len(tr) != 1 || tr[0] != "2" {
			t.Errorf("Trailer() after the end = %v, want the committed copy's copy=2", st.Trailer())
		}
	})
}
