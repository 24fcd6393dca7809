package grpcmw_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/internal/memnet"
)

// A differential oracle for a retrying (unhedged) stream's Header, Trailer
// and RecvMsg: the same scripted server, called through grpc-go's own retry
// (gRFC A6, a service config's retryPolicy) and through meshless's stream
// interceptor with gRPC's retry off, must show the caller the same header,
// messages, final status and trailer, after as many attempts.

// hdrPattern is one way a caller uses the stream; each ends it.
type hdrPattern struct {
	name string
	bidi bool
	run  func(st grpc.ClientStream) hdrSeen
}

var hdrPatterns = []hdrPattern{
	{"Header then RecvMsg", false, func(st grpc.ClientStream) (s hdrSeen) {
		s.header = headerValue(st.Header())
		msgs, code := recvRest(st)
		s.msgs, s.code = strings.Join(msgs, " "), code
		return s
	}},
	{"RecvMsg then Header", false, func(st grpc.ClientStream) (s hdrSeen) {
		msgs, code := recvRest(st)
		s.msgs, s.code = strings.Join(msgs, " "), code
		s.header = headerValue(st.Header())
		return s
	}},
	{"Header beside RecvMsg", false, func(st grpc.ClientStream) (s hdrSeen) {
		var wg sync.WaitGroup
		wg.Go(func() { s.header = headerValue(st.Header()) })
		var msgs []string
		msgs, s.code = recvRest(st)
		wg.Wait()
		s.msgs = strings.Join(msgs, " ")
		return s
	}},
	{"SendMsg, CloseSend, Header", true, func(st grpc.ClientStream) (s hdrSeen) {
		if err := st.SendMsg(&testgrpc.StreamingOutputCallRequest{Payload: payload("a")}); err != nil && err != io.EOF {
			s.header = "SendMsg " + err.Error()
		}
		_ = st.CloseSend()
		s.header += headerValue(st.Header())
		msgs, code := recvRest(st)
		s.msgs, s.code = strings.Join(msgs, " "), code
		return s
	}},
	{"CloseSend, Header", true, func(st grpc.ClientStream) (s hdrSeen) {
		_ = st.CloseSend()
		s.header = headerValue(st.Header())
		msgs, code := recvRest(st)
		s.msgs, s.code = strings.Join(msgs, " "), code
		return s
	}},
	// Context commits the call, as grpc-go's does: the context the caller
	// read (the attempt's peer, its end) is not replaced by a retry's.
	// (Trailer commits too, but reading it before the end races inside
	// grpc-go's transport: TestARetryingStreamsTrailerCommitsTheCall.)
	{"Context then RecvMsg", false, func(st grpc.ClientStream) (s hdrSeen) {
		_ = st.Context()
		msgs, code := recvRest(st)
		s.msgs, s.code = strings.Join(msgs, " "), code
		s.header = headerValue(st.Header())
		return s
	}},
}

// hdrScenario is one server script.
type hdrScenario struct {
	name         string
	ok           int
	headersFirst bool
}

var hdrScenarios = []hdrScenario{
	{"Trailers-Only UNAVAILABLE, then OK", 2, false},
	{"two Trailers-Only UNAVAILABLE, then OK", 3, false},
	{"Trailers-Only UNAVAILABLE until the attempts run out", 4, false},
	{"headers then UNAVAILABLE, then OK", 2, true},
}

const grpcRetryServiceConfig = `{"methodConfig": [{
  "name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.001s",
    "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// viaGRPC runs p against h through grpc-go's own retry.
func viaGRPC(t *testing.T, h *hdrServer, p hdrPattern) hdrSeen {
	lis := memnet.Listen()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///mem",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(grpcRetryServiceConfig))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return runHdrPattern(t, testgrpc.NewTestServiceClient(conn), h, p)
}

// viaMeshless runs p against h through meshless's retry, gRPC's off.
func viaMeshless(t *testing.T, h *hdrServer, p hdrPattern) hdrSeen {
	client, _, stop := inBubbleDial(t, h, meshlessStreamRetry, grpc.WithDisableRetry())
	defer stop()
	return runHdrPattern(t, client, h, p)
}

func runHdrPattern(t *testing.T, client testgrpc.TestServiceClient, h *hdrServer, p hdrPattern) hdrSeen {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var st grpc.ClientStream
	var err error
	if p.bidi {
		st, err = client.FullDuplexCall(ctx)
	} else {
		st, err = client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	}
	if err != nil {
		t.Fatal(err)
	}
	s := p.run(st)
	s.trailer = strings.Join(st.Trailer().Get("attempt"), ",")
	s.attempts = h.n.Load()
	return s
}

// hdrDeliberate returns what meshless shows instead of grpc-go for a
// scenario and pattern where the difference is deliberate and documented,
// and why; ok false where the two must agree.
func hdrDeliberate(sc hdrScenario, p hdrPattern) (want hdrSeen, why string, ok bool) {
	if sc.headersFirst && p.name == "RecvMsg then Header" {
		// docs/grpc.md, "Retries" (the table's row "when retries stop for a
		// stream") and docs/grpc-streams.md, "Retry": meshless commits when
		// the caller gets a response or Header returns the headers, not
		// when headers merely arrive (grpc-go retries only Trailers-Only
		// responses). Attempt 1's header never reached the caller, so its
		// failure is retried and the caller sees attempt 2 throughout.
		return hdrSeen{header: "2", msgs: "2/0 2/1", code: codes.OK, trailer: "2", attempts: 2},
			"meshless commits at a header the caller read, not at one that arrived", true
	}
	return hdrSeen{}, "", false
}

func TestRetryingStreamHeaderMatchesGRPCRetry(t *testing.T) {
	for _, sc := range hdrScenarios {
		for _, p := range hdrPatterns {
			t.Run(sc.name+"/"+p.name, func(t *testing.T) {
				// grpc-go's side runs outside a bubble: its stream holds a
				// mutex through a retry's backoff, and a Header blocked on
				// that mutex is not durably blocked, so the bubble's clock
				// would never reach the backoff's end. What it shows the
				// caller does not depend on time: its operations take turns
				// on that mutex, and its backoff is 1ms.
				grpcSaw := viaGRPC(t, &hdrServer{ok: sc.ok, headersFirst: sc.headersFirst}, p)
				synctest.Test(t, func(t *testing.T) {
					meshSaw := viaMeshless(t, &hdrServer{ok: sc.ok, headersFirst: sc.headersFirst, hold: time.Second}, p)
					want, why, deliberate := hdrDeliberate(sc, p)
					if !deliberate {
						want = grpcSaw
					}
					t.Logf("grpc-go:  %v", grpcSaw)
					t.Logf("meshless: %v", meshSaw)
					if meshSaw != want {
						if deliberate {
							t.Fatalf("meshless saw %v; want %v (%s; grpc-go saw %v)", meshSaw, want, why, grpcSaw)
						}
						t.Fatalf("meshless saw %v; grpc-go's own retry saw %v", meshSaw, want)
					}
				})
			})
		}
	}
}
