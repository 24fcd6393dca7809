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
	"time"

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
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
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
func cPods(t *testing.T, transport, yml string, n int, fail *atomic.Bool, clk resilience.Clock) []cPod {
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
			var opts []grpcmw.Option
			if clk != nil {
				opts = append(opts, grpcmw.WithClock(clk))
			}
			chain, err := grpcmw.New(cfg, opts...)
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
		var opts []httpmw.Option
		if clk != nil {
			opts = append(opts, httpmw.WithClock(clk))
		}
		chain, err := httpmw.New(cfg, opts...)
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
				pods := cPods(t, tr, yml("sum-"+c.decideOn+"-"+tr), 2, &fail, nil)
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
				pods = cPods(t, tr, yml("alone-"+c.decideOn+"-"+tr), 2, &fail, nil)
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

// TestAClusterCloseStartsTheThrottlerAfresh: when a pod's breaker closes
// because another pod's probes passed (a close that reaches it through
// the cluster), its throttler starts afresh, as when its own probes pass
// (docs/overload.md: "when the breaker closes, its probes having passed,
// the throttler starts afresh"; docs/cluster.md). Both pods' calls fail
// during the outage (B's below its breaker's minimum), so that their
// throttlers hold them back; A's open reaches B, the pod that leased the
// probe closes the breaker, and the other learns the close at its next
// sync.
func TestAClusterCloseStartsTheThrottlerAfresh(t *testing.T) {
	srv := redistest.Start(t)
	for _, tr := range []string{"grpc", "http"} {
		t.Run(tr, func(t *testing.T) {
			yml := fmt.Sprintf(`
defaults:
  adaptiveThrottling: { window: 1h, minimumRequests: 5 }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10, failureRateThreshold: 100, waitDurationInOpenState: 30s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { maxAttempts: 1 }
  timeout: { enabled: false }
cluster: { redis: { addr: %q }, namespace: afresh-%s, syncInterval: 1h, decideOn: either }
`, srv.Addr(), tr)
			var fail atomic.Bool
			clk := resiliencetest.NewClock(time.Now())
			pods := cPods(t, tr, yml, 2, &fail, clk)
			a, b := pods[0], pods[1]
			fail.Store(true)
			throttled := 0
			for fails := 0; fails < 9 && throttled < 1000; { // below B's breaker's minimum
				switch b.call() {
				case tFail:
					fails++
				case "rejected:THROTTLED":
					throttled++
				}
			}
			if throttled == 0 {
				t.Fatal("B's throttler held nothing back during the outage")
			}
			for n := 0; a.state() != "OPEN"; n++ {
				if n > 1000 {
					t.Fatal("A's breaker never opened")
				}
				a.call()
			}
			sync := func() {
				for _, p := range pods {
					if err := p.cluster.Sync(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			sync()
			if s := b.state(); s != "OPEN" {
				t.Fatalf("B is %s after A opened, want OPEN", s)
			}
			clk.Advance(30 * time.Second)
			sync() // one pod leases the probe (the first to half-open may)
			fail.Store(false)
			// Both throttlers hold the outage back; the pod that did not
			// get the probe sends no call through its throttler until the
			// close.
			other := b
			got := a.call()
			if got == "rejected:CIRCUIT_OPEN" {
				other, got = a, b.call()
			}
			if got != "OK" && got != "200" {
				t.Fatalf("the probe got %s", got)
			}
			sync()
			if s, sb := a.state(), b.state(); s != "CLOSED" || sb != "CLOSED" {
				t.Fatalf("after the probe passed: A %s, B %s, want CLOSED", s, sb)
			}
			fail.Store(true)
			counts := map[string]int{}
			for range 4 { // below minimumRequests
				counts[other.call()]++
			}
			if counts["rejected:THROTTLED"] != 0 {
				t.Errorf("the first 4 calls after the close of the pod that sent no probe: %v; its throttler remembered the outage", counts)
			}
		})
	}
}
