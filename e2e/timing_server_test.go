package e2e

// The adaptive bulkhead's keys on a server that sheds load
// (grpcmw.NewServer, httpmw.NewServer; docs/grpc-server.md, docs/http.md):
// the same keys as a client's, through a plain client, on a synctest
// bubble's clock, in defaults and on the method (route) over a decoy.

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/memnet"
)

// inShedding runs f in a bubble with a plain client of a server of
// transport that sheds load with yml; call names what the caller got: ok,
// shed (RESOURCE_EXHAUSTED, 503 with the reason BULKHEAD_FULL), or else.
func inShedding(t *testing.T, transport, yml string, f func(t *testing.T, b *tBackend, call func(context.Context) string)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		b := &tBackend{}
		lis := memnet.Listen()
		var call func(context.Context) string
		if transport == "grpc" {
			cfg, err := grpcmw.ParseConfig([]byte(yml))
			if err != nil {
				t.Fatalf("%v\n%s", err, yml)
			}
			shed, err := grpcmw.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			srv := grpc.NewServer(shed.ServerOptions()...)
			testgrpc.RegisterTestServiceServer(srv, tGRPC{b: b})
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(lis) }()
			defer func() { srv.Stop(); <-served }()
			conn, err := grpc.NewClient("passthrough:///mem",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := testgrpc.NewTestServiceClient(conn)
			call = func(ctx context.Context) string {
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				switch {
				case err == nil:
					return tOK
				case status.Code(err) == codes.ResourceExhausted && grpcmw.RejectionReason(err) == "BULKHEAD_FULL":
					return "shed"
				}
				return err.Error()
			}
		} else {
			cfg, err := httpmw.ParseConfig([]byte(yml))
			if err != nil {
				t.Fatalf("%v\n%s", err, yml)
			}
			shed, err := httpmw.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer shed.Close()
			srv := &http.Server{Handler: shed.Handler(b)}
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(lis) }()
			defer func() { _ = srv.Close(); <-served }()
			tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			call = func(ctx context.Context) string {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpHost+"/item/7", nil)
				resp, err := client.Do(req)
				if err != nil {
					return err.Error()
				}
				_ = resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK:
					return tOK
				case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Meshless-Rejection") == "BULKHEAD_FULL":
					return "shed"
				}
				return resp.Status
			}
		}
		f(t, b, call)
		synctest.Wait()
		b.handlers.Wait()
	})
}

// TestAServersAdaptiveBulkheadStartsAtItsKeys: a server's adaptive
// bulkhead admits initialLimit calls at once (20 by default, kept within
// [minLimit, maxLimit]) and sheds the next.
func TestAServersAdaptiveBulkheadStartsAtItsKeys(t *testing.T) {
	for _, c := range []struct {
		keys string
		want int
	}{
		{"adaptive: {}", 20},
		{"adaptive: { maxLimit: 5 }", 5},
		{"adaptive: { minLimit: 30 }", 30},
		{"adaptive: { initialLimit: 7 }", 7},
	} {
		t.Run(c.keys, func(t *testing.T) {
			forTiming(t, func(t *testing.T, tr string, lv tLevel) {
				yml := tYAML(tr, lv, "adaptiveThrottling: { enabled: false }", "bulkhead", c.keys, "maxConcurrentCalls: 3")
				inShedding(t, tr, yml, func(t *testing.T, b *tBackend, call func(context.Context) string) {
					b.set(tOK, time.Hour)
					ctx, cancel := context.WithCancel(context.Background())
					var calls sync.WaitGroup
					defer func() { cancel(); calls.Wait() }()
					for n := range 40 {
						var got string
						calls.Go(func() { got = call(ctx) })
						synctest.Wait()
						if got == "shed" {
							if n != c.want {
								t.Errorf("%d calls admitted at once, want %d", n, c.want)
							}
							return
						}
						if got != "" {
							t.Fatalf("call %d got %s", n, got)
						}
					}
					t.Errorf("40 calls admitted at once, want %d", c.want)
				})
			})
		})
	}
}
