package grpcmw_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// pods starts n backends; answer(i) scripts backend i. It returns their
// addresses and per-backend call counts.
func pods(t *testing.T, n int, answer func(i int) (*testgrpc.SimpleResponse, error)) ([]string, []*atomic.Int32, []*health.Server) {
	t.Helper()
	addrs, counts, hs := make([]string, n), make([]*atomic.Int32, n), make([]*health.Server, n)
	for i := range n {
		f := new(faultServer)
		f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) { return answer(i) })
		addrs[i], hs[i] = serve(t, f)
		counts[i] = &f.calls
	}
	return addrs, counts, hs
}

func dialPods(t *testing.T, addrs []string, yamlConfig string, opts ...grpcmw.Option) (testgrpc.TestServiceClient, *grpcmw.Chain) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	r := manual.NewBuilderWithScheme("pods")
	var st resolver.State
	for _, a := range addrs {
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r.InitialState(st)
	conn, err := grpc.NewClient("pods:///svc", append(chain.DialOptions(), grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testgrpc.NewTestServiceClient(conn), chain
}

// The YAML's outlierDetection installs the balancer through DialOptions: a
// pod answering UNAVAILABLE is ejected after consecutiveFailures and gets
// no more calls; a pod answering NOT_FOUND is a healthy pod and stays.
func TestOutlierDetectionFromYAML(t *testing.T) {
	addrs, counts, _ := pods(t, 4, func(i int) (*testgrpc.SimpleResponse, error) {
		switch i {
		case 0:
			return nil, status.Error(codes.Unavailable, "bad pod")
		case 1:
			return nil, status.Error(codes.NotFound, "no such thing")
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	obs := new(resiliencetest.Observer)
	client, chain := dialPods(t, addrs, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
outlierDetection:
  consecutiveFailures: 3
  failurePercentage: { enabled: false }
  successRate: { enabled: false }
  slowCalls: { enabled: false }
`, grpcmw.WithObserver(obs))
	// The ejection is made off the call path, by the balancer's goroutine
	// that the third failure wakes: a call picked in between may still reach
	// the pod, so the first phase calls until the monitor reports the
	// ejection (at most 100 calls) and bounds the pod's calls from below
	// only. Once reported, the child's picker already excludes the pod.
	calls := 0
	for ; calls < 100 && len(chain.Outlier().Ejected()) == 0; calls++ {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if got := chain.Outlier().Ejected(); !slices.Equal(got, []string{addrs[0]}) {
		t.Fatalf("after %d calls ejected %v, want only the UNAVAILABLE pod %s", calls, got, addrs[0])
	}
	if n := counts[0].Load(); n < 3 {
		t.Fatalf("the UNAVAILABLE pod was ejected after %d calls, want after its 3rd failure", n)
	}
	for range 100 - calls {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	// The observer heard the ejection, with the endpoint and the reason.
	ej := obs.Events(resilience.EventEjected)
	if len(ej) != 1 || ej[0].Endpoint != addrs[0] || ej[0].Reason == nil || ej[0].Reason.String() != outlier.ReasonConsecutiveFailures {
		t.Fatalf("observer's ejection events %+v, want one for %s by consecutive_failures", ej, addrs[0])
	}
	before := counts[0].Load()
	for range 40 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if counts[0].Load() != before {
		t.Fatalf("the ejected pod got %d calls after its ejection was reported, want none", counts[0].Load()-before)
	}
	if counts[1].Load() < 20 {
		t.Fatalf("the NOT_FOUND pod got %d of 140 calls: it was treated as unhealthy", counts[1].Load())
	}
}

// healthCheck turns on gRPC's client-side health checking: a pod whose
// health service says NOT_SERVING gets no calls, and gets them again once
// it says SERVING.
func TestHealthCheckFromYAML(t *testing.T) {
	addrs, counts, hs := pods(t, 3, func(int) (*testgrpc.SimpleResponse, error) { return &testgrpc.SimpleResponse{}, nil })
	hs[0].SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	client, _ := dialPods(t, addrs, `
defaults: { retry: { enabled: false } }
healthCheck: { serviceName: "" }
`)
	for range 60 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := counts[0].Load(); n != 0 {
		t.Fatalf("the NOT_SERVING pod got %d calls, want none", n)
	}
	hs[0].SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	waitUntil(t, func() bool {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		return counts[0].Load() > 0
	})
}

// The chain's outlier listener tells both the user's listener and the
// observer of each ejection and return.
func TestEjectionsReachListenerAndObserver(t *testing.T) {
	obs := new(resiliencetest.Observer)
	user := &countingListener{}
	l := grpcmw.EjectionListener(user, obs.Attach(resilience.Source{Kind: resilience.KindOutlier}))
	l.Ejected("a:1", outlier.ReasonFailurePercentage)
	l.Returned("a:1")
	if user.ejected.Load() != 1 || user.returned.Load() != 1 {
		t.Fatalf("user listener: %d ejections, %d returns, want 1 and 1", user.ejected.Load(), user.returned.Load())
	}
	ev := obs.Events(resilience.EventEjected, resilience.EventReturned)
	if len(ev) != 2 || ev[0].Type != resilience.EventEjected || ev[0].Reason.String() != "failure_percentage" ||
		ev[1].Type != resilience.EventReturned || ev[1].Endpoint != "a:1" {
		t.Fatalf("observer events %+v", ev)
	}
	// Neither is required.
	grpcmw.EjectionListener(nil, nil).Ejected("a:1", outlier.ReasonSlowCalls)
	grpcmw.EjectionListener(nil, nil).Returned("a:1")
}

type countingListener struct{ ejected, returned atomic.Int64 }

func (c *countingListener) Ejected(string, string) { c.ejected.Add(1) }
func (c *countingListener) Returned(string)        { c.returned.Add(1) }
