package otelmw_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/test/bufconn"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// docLine returns the line of docs/metrics.md that starts with prefix.
func docLine(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var found string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			if found != "" {
				t.Fatalf("docs/metrics.md: two lines start with %q", prefix)
			}
			found = l
		}
	}
	if found == "" {
		t.Fatalf("docs/metrics.md: no line starts with %q", prefix)
	}
	return found
}

// Every error.type a logical call is recorded with is one the catalogue
// lists: each rejection's reason on gRPC (deferred included), and a
// canceled HTTP call's.
func TestCallErrorTypesAreDocumented(t *testing.T) {
	logical := docLine(t, "own rejections") + docLine(t, "every code but OK is an error for a gRPC client)")
	for _, k := range []resilience.Kind{resilience.KindCircuitBreaker, resilience.KindBulkhead,
		resilience.KindRateLimiter, resilience.KindThrottler, resilience.KindDeadLetter} {
		if v := "`" + k.ErrorType() + "`"; !strings.Contains(logical, v) {
			t.Errorf("docs/metrics.md, Logical calls: the gRPC error.type %s is not listed", v)
		}
	}

	// A deferred gRPC call.
	mp, r := newProvider(t)
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	client := dialClosedChain(t, `
defaults:
  circuitBreaker: { mode: FORCED_OPEN }
  retry: { enabled: false }
  deadLetter: { path: `+t.TempDir()+`/dl.db }
`, grpcmw.WithObserver(obs))
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); grpcmw.RejectionReason(err) != resilience.ReasonDeferred {
		t.Fatalf("call: %v, want DEFERRED", err)
	}
	for et := range errorTypesOf(t, collect(t, r)["meshless.call.duration"]) {
		if !strings.Contains(logical, "`"+et+"`") {
			t.Errorf("a deferred call is recorded with error.type %q, which docs/metrics.md does not list", et)
		}
	}

	// An HTTP call whose caller gave up.
	httpRow := docLine(t, "| `error.type` |")
	in := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(in)
		<-r.Context().Done()
	}))
	defer srv.Close()
	mp, r = newProvider(t)
	hobs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer hobs.Close()
	chain, err := httpmw.New(nil, httpmw.WithObserver(hobs))
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-in; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/x", nil)
	if resp, err := chain.Client(tr).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the canceled call succeeded")
	}
	got := errorTypesOf(t, collect(t, r)["meshless.call.duration"])
	if len(got) == 0 {
		t.Fatal("no call recorded")
	}
	for et := range got {
		if !strings.Contains(httpRow, "`"+et+"`") {
			t.Errorf("a canceled HTTP call is recorded with error.type %q, which docs/metrics.md's HTTP table does not list", et)
		}
	}
}

// dialClosedChain is dialBufconn with a chain closed at the end of the test
// (a dead-letter queue's goroutine ends with it).
func dialClosedChain(t *testing.T, yaml string, opts ...grpcmw.Option) testgrpc.TestServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, new(flakyServer))
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	conn, err := grpc.NewClient("passthrough:///bufnet", append(chain.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}
