package e2e

// cluster.decideOn (docs/configuration.md, cluster; docs/cluster.md),
// through grpcmw and httpmw: two pods of one client share their breakers'
// windows through a real redis-server (internal/redistest). The pods sync
// by hand (Cluster().Sync, with syncInterval: 1h): the background sync runs
// on the wall clock, which these tests never wait on.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/redistest"
)

// cPod is one instance of the client.
type cPod struct {
	call    func() string // tOK or tFail: what the caller got
	breaker func() *circuitbreaker.Breaker
	cluster *cluster.Cluster
}

func (p cPod) state() string {
	if cb := p.breaker(); cb != nil {
		return cb.State().String()
	}
	return "none"
}

// cPods starts n pods of transport from yml against one backend that
// fails while fail is set.
func cPods(t *testing.T, transport, yml string, n int, fail *atomic.Bool) []cPod {
	t.Helper()
	var pods []cPod
	if transport == "grpc" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		b := &tBackend{}
		testgrpc.RegisterTestServiceServer(srv, cGRPC{tGRPC{b: b}, fail})
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		cfg, err := grpcmw.ParseConfig([]byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			chain, err := grpcmw.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(chain.Close)
			conn, err := grpc.NewClient(lis.Addr().String(), append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			client := testgrpc.NewTestServiceClient(conn)
			pods = append(pods, cPod{
				call: func() string {
					_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
					if c, ok := rejected(err); ok {
						return c
					}
					if status.Code(err) == codes.Unavailable {
						return tFail
					}
					return fmt.Sprint(status.Code(err))
				},
				breaker: func() *circuitbreaker.Breaker { cb, _ := chain.Breaker(grpcService); return cb },
				cluster: chain.Cluster(),
			})
		}
		return pods
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	cfg, err := httpmw.ParseConfig([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		chain, err := httpmw.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(chain.Close)
		client := chain.Client(srv.Client().Transport)
		pods = append(pods, cPod{
			call: func() string {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/item/7", nil)
				resp, err := client.Do(req)
				if c, ok := rejected(err); ok {
					return c
				}
				if err != nil {
					return err.Error()
				}
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					return tFail
				}
				return fmt.Sprint(resp.StatusCode)
			},
			breaker: func() *circuitbreaker.Breaker { cb, _ := chain.Breaker("_OTHER"); return cb },
			cluster: chain.Cluster(),
		})
	}
	return pods
}

// cGRPC fails while fail is set.
type cGRPC struct {
	tGRPC
	fail *atomic.Bool
}

func (g cGRPC) UnaryCall(ctx context.Context, r *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if g.fail.Load() {
		return nil, status.Error(codes.Unavailable, "down")
	}
	return &testgrpc.SimpleResponse{}, nil
}

// TestDecideOnPicksTheRatesThatOpen: local opens on a pod's own window
// only, cluster on the pods' sum only, either on both.
func TestDecideOnPicksTheRatesThatOpen(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		decideOn             string
		sumOpens, aloneOpens bool
	}{{"local", false, true}, {"cluster", true, false}, {"either", true, true}} {
		for _, tr := range []string{"grpc", "http"} {
			t.Run(c.decideOn+"/"+tr, func(t *testing.T) {
				yml := func(ns string) string {
					return fmt.Sprintf(`
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 20, minimumNumberOfCalls: 6, failureRateThreshold: 50 }
  retry: { maxAttempts: 1 }
cluster: { redis: { addr: %q }, namespace: %s, syncInterval: 1h, decideOn: %s }
`, srv.Addr(), ns, c.decideOn)
				}
				sync := func(pods []cPod) {
					for range 2 { // publish, then read
						for _, p := range pods {
							if err := p.cluster.Sync(t.Context()); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				var fail atomic.Bool
				// Two pods, 3 failures each: below minimumNumberOfCalls
				// alone, 100 % of 6 together.
				pods := cPods(t, tr, yml("sum-"+c.decideOn+"-"+tr), 2, &fail)
				fail.Store(true)
				for _, p := range pods {
					for range 3 {
						p.call()
					}
				}
				sync(pods)
				for i, p := range pods {
					if got, want := p.state(), map[bool]string{true: "OPEN", false: "CLOSED"}[c.sumOpens]; got != want {
						t.Errorf("the sum: pod %d is %s, want %s", i, got, want)
					}
				}
				// One pod fails 6 calls after the other's 14 successes: its
				// own window is at 100 %, the sum at 30 %.
				fail.Store(false)
				pods = cPods(t, tr, yml("alone-"+c.decideOn+"-"+tr), 2, &fail)
				for range 14 {
					pods[1].call()
				}
				sync(pods)
				fail.Store(true)
				for range 6 {
					pods[0].call()
				}
				sync(pods)
				if got, want := pods[0].state(), map[bool]string{true: "OPEN", false: "CLOSED"}[c.aloneOpens]; got != want {
					t.Errorf("alone: the failing pod is %s, want %s", got, want)
				}
				if got := pods[1].state(); got != "CLOSED" && !c.aloneOpens {
					t.Errorf("alone: the good pod is %s, want CLOSED", got)
				}
			})
		}
	}
}
