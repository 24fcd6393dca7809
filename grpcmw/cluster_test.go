package grpcmw_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

const clusterKey = "grpc.testing.TestService"

// clusterYAML is the one file the three pods are built from; %ADDR% is the
// test's redis-server.
const clusterYAML = `
defaults:
  circuitBreaker:
    slidingWindowSize: 10
    minimumNumberOfCalls: 6
    waitDurationInOpenState: 30s
    permittedNumberOfCallsInHalfOpenState: 2
  retry: { enabled: false }
  timeout: { enabled: false }
cluster:
  redis: { addr: "%ADDR%" }
  namespace: three-pods
  syncInterval: 1h   # the tests sync by hand (Cluster().Sync), or rely on the channel
  decideOn: either
`

// backend is a loopback gRPC server whose answer the test sets, shared by
// the pods.
type backend struct {
	addr  string
	calls *atomic.Int32
	f     *faultServer
}

func newBackend(t *testing.T) *backend {
	f := new(faultServer)
	addr, _ := serve(t, f)
	return &backend{addr: addr, calls: &f.calls, f: f}
}

func (b *backend) answer(code codes.Code) {
	b.f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if code == codes.OK {
			return &testgrpc.SimpleResponse{}, nil
		}
		return nil, status.Error(code, "backend says so")
	})
}

// clusterPod is one instance of the client: its chain from the shared YAML,
// its own gRPC connection.
type clusterPod struct {
	name   string
	chain  *grpcmw.Chain
	client testgrpc.TestServiceClient
}

func threePods(t *testing.T, yaml string, be *backend, opts ...grpcmw.Option) []*clusterPod {
	t.Helper()
	return podsOf(t, yaml, be, []string{"A", "B", "C"}, opts...)
}

// podsOf starts one pod per name, each its own chain from yaml and its own
// connection to be.
func podsOf(t *testing.T, yaml string, be *backend, names []string, opts ...grpcmw.Option) []*clusterPod {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var pods []*clusterPod
	for _, name := range names {
		chain, err := grpcmw.New(cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(chain.Close)
		conn, err := grpc.NewClient(be.addr, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		pods = append(pods, &clusterPod{name: name, chain: chain, client: testgrpc.NewTestServiceClient(conn)})
	}
	return pods
}

func (p *clusterPod) call(ctx context.Context) error {
	_, err := p.client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	return err
}

// calls makes n calls and wants each to end with code want.
func (p *clusterPod) calls(t *testing.T, n int, want codes.Code) {
	t.Helper()
	for range n {
		if err := p.call(t.Context()); status.Code(err) != want {
			t.Fatalf("pod %s: call returned %v, want %v", p.name, err, want)
		}
	}
}

func (p *clusterPod) sync(t *testing.T) {
	t.Helper()
	if err := p.chain.Cluster().Sync(t.Context()); err != nil {
		t.Fatalf("pod %s: Sync: %v", p.name, err)
	}
}

func (p *clusterPod) state() circuitbreaker.State {
	b, ok := p.chain.Breaker(clusterKey)
	if !ok {
		return 255
	}
	return b.State()
}

// wantRejected wants the pod's next call rejected with CIRCUIT_OPEN,
// without reaching the backend.
func (p *clusterPod) wantRejected(t *testing.T, be *backend) {
	t.Helper()
	before := be.calls.Load()
	err := p.call(t.Context())
	if grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
		t.Fatalf("pod %s: call returned %v, want CIRCUIT_OPEN", p.name, err)
	}
	if n := be.calls.Load() - before; n != 0 {
		t.Fatalf("pod %s: the rejected call reached the backend (%d calls)", p.name, n)
	}
}

func yamlFor(srv *redistest.Server) string {
	return strings.ReplaceAll(clusterYAML, "%ADDR%", srv.Addr())
}

// remoteOpens counts what a cluster listener hears.
type remoteOpens struct {
	syncs, opens atomic.Int32
}

func (r *remoteOpens) Synced(bool)       { r.syncs.Add(1) }
func (r *remoteOpens) Connected(bool)    {}
func (r *remoteOpens) RemoteOpen(string) { r.opens.Add(1) }

func TestClusterPodAOpensAndBAndCRejectWithinOneSync(t *testing.T) {
	srv, be := redistest.Start(t), newBackend(t)
	heard := new(remoteOpens)
	pods := threePods(t, yamlFor(srv), be, grpcmw.WithClusterListener(heard))
	a, b, c := pods[0], pods[1], pods[2]
	be.answer(codes.OK)
	b.calls(t, 1, codes.OK) // B and C have called before; they see no failure
	c.calls(t, 1, codes.OK)
	be.answer(codes.Unavailable)
	a.calls(t, 6, codes.Unavailable)
	// A opens on its own. B's state is not checked here: B has seen only
	// OKs, and the open A publishes on the channel can reach B before any
	// sync, within microseconds (B then reads OPEN already).
	if a.state() != circuitbreaker.StateOpen {
		t.Fatalf("A %v: want A open on its own", a.state())
	}
	a.sync(t) // A's sync publishes the open (the channel may be quicker)
	b.sync(t)
	c.sync(t)
	b.wantRejected(t, be)
	c.wantRejected(t, be)
	if n := heard.opens.Load(); n != 2 {
		t.Errorf("the listener (WithClusterListener) heard %d remote opens, want 2 (B and C)", n)
	}
}

func TestClusterOpensWhatNoPodCouldDecideAlone(t *testing.T) {
	srv, be := redistest.Start(t), newBackend(t)
	pods := threePods(t, yamlFor(srv), be)
	be.answer(codes.Unavailable)
	for _, p := range pods {
		p.calls(t, 3, codes.Unavailable) // 3 < minimumNumberOfCalls (6): no pod decides
		if p.state() != circuitbreaker.StateClosed {
			t.Fatalf("pod %s opened on 3 calls", p.name)
		}
	}
	for range 2 { // publish, then decide and spread
		for _, p := range pods {
			p.sync(t)
		}
	}
	for _, p := range pods {
		p.wantRejected(t, be)
	}
}

func TestClusterHalfOpenProbesAreLimitedAcrossPods(t *testing.T) {
	srv, be := redistest.Start(t), newBackend(t)
	clk := resiliencetest.NewClock(time.Now())
	pods := threePods(t, yamlFor(srv), be, grpcmw.WithClock(clk))
	be.answer(codes.Unavailable)
	for _, p := range pods {
		p.calls(t, 1, codes.Unavailable) // every pod has its breaker
	}
	pods[0].calls(t, 5, codes.Unavailable)
	for _, p := range pods {
		p.sync(t)
	}
	clk.Advance(30 * time.Second) // every pod half-open
	for _, p := range pods {
		if p.state() != circuitbreaker.StateHalfOpen {
			t.Fatalf("pod %s is %v, want HALF_OPEN", p.name, p.state())
		}
		p.sync(t) // lease probes
	}
	// The backend holds every call it gets; 3 pods try 3 calls each.
	release := make(chan struct{})
	var held atomic.Int32
	be.f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		held.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	var wg sync.WaitGroup
	var rejected, succeeded, other atomic.Int32
	for _, p := range pods {
		for range 3 {
			wg.Go(func() {
				err := p.call(context.Background())
				switch {
				case err == nil:
					succeeded.Add(1)
				case grpcmw.RejectionReason(err) == grpcmw.ReasonCircuitOpen:
					rejected.Add(1)
				default:
					other.Add(1)
				}
			})
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for (rejected.Load() < 7 || held.Load() < 2) && time.Now().Before(deadline) { // rejections return at once; probes reach the backend and wait
		time.Sleep(time.Millisecond) // polling a count, bounded by the deadline
	}
	if n := held.Load(); n != 2 || rejected.Load() != 7 {
		t.Errorf("the backend holds %d probes, %d calls rejected; want 2 (permittedNumberOfCallsInHalfOpenState) and 7", n, rejected.Load())
	}
	close(release)
	wg.Wait()
	if succeeded.Load() != 2 || other.Load() != 0 || held.Load() != 2 {
		t.Fatalf("%d probes succeeded, %d reached the backend, %d other errors; want 2, 2, 0", succeeded.Load(), held.Load(), other.Load())
	}
	for _, p := range pods {
		p.sync(t) // the holder publishes the close; the others learn it
	}
	for _, p := range pods {
		if p.state() != circuitbreaker.StateClosed {
			t.Errorf("pod %s is %v after the probes succeeded, want CLOSED", p.name, p.state())
		}
	}
}

func TestClusterRedisKilledAndRestarted(t *testing.T) {
	srv, be := redistest.Start(t), newBackend(t)
	yaml := strings.Replace(yamlFor(srv), "syncInterval: 1h", "syncInterval: 50ms", 1)
	pods := threePods(t, yaml, be)
	a, b := pods[0], pods[1]
	be.answer(codes.OK)
	for _, p := range pods {
		p.calls(t, 1, codes.OK)
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
			time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
		}
	}
	eventually("connected", func() bool { return a.chain.Cluster().Connected() && b.chain.Cluster().Connected() })

	// Callers keep calling throughout; none may see anything but the
	// backend's answers and the breaker's own rejections.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	for _, p := range pods[2:] {
		wg.Go(func() {
			tick := time.NewTicker(time.Millisecond) // a steady load, not a spin
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				err := p.call(context.Background())
				code := status.Code(err)
				if code != codes.OK && code != codes.Unavailable && grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
					bad.Store(err)
				}
			}
		})
	}
	srv.Kill()
	eventually("disconnected", func() bool { return !a.chain.Cluster().Connected() })
	be.answer(codes.Unavailable)
	a.calls(t, 6, codes.Unavailable) // A decides alone
	if a.state() != circuitbreaker.StateOpen {
		t.Fatalf("A is %v, want OPEN by its own window", a.state())
	}
	if err := b.chain.Cluster().Sync(t.Context()); err == nil {
		t.Fatal("B synced with Redis killed")
	}
	if b.state() != circuitbreaker.StateClosed {
		t.Fatalf("B is %v with Redis away, want CLOSED (local decisions)", b.state())
	}
	srv.Restart()
	// Sharing resumes by itself: A's pending open is claimed and published.
	eventually("B opens after Redis returns", func() bool { return b.state() == circuitbreaker.StateOpen })
	close(stop)
	wg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatalf("a caller saw %v", err)
	}
}

// Two teams' clients on one Redis, each calling its own backend through a
// service of the same name: with the namespace left at its default they
// share nothing; the pods of one client (same target) still share; a
// namespace both write shares on purpose.
func TestClusterUnrelatedClientsShareNothingByDefault(t *testing.T) {
	for _, tt := range []struct {
		name      string
		namespace string // the line written in both clients' YAML
		shared    bool   // team B's breaker opens with team A's
	}{
		{name: "namespace left at its default", namespace: "", shared: false},
		{name: "namespace written by both", namespace: "namespace: shared-on-purpose", shared: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			yaml := strings.Replace(yamlFor(srv), "namespace: three-pods", tt.namespace, 1)
			beA, beB := newBackend(t), newBackend(t)
			teamA := podsOf(t, yaml, beA, []string{"A1", "A2"})
			teamB := podsOf(t, yaml, beB, []string{"B1"})
			beA.answer(codes.Unavailable)
			beB.answer(codes.OK)
			teamA[1].calls(t, 1, codes.Unavailable)
			teamB[0].calls(t, 1, codes.OK)
			teamA[0].calls(t, 6, codes.Unavailable) // A1 opens
			for _, p := range append(teamA, teamB...) {
				p.sync(t)
			}
			teamA[1].wantRejected(t, beA) // the pods of one client share
			if tt.shared {
				teamB[0].wantRejected(t, beB)
				return
			}
			teamB[0].calls(t, 3, codes.OK) // a healthy backend, reached
			if st := teamB[0].state(); st != circuitbreaker.StateClosed {
				t.Fatalf("team B's breaker is %v", st)
			}
		})
	}
}

// A chain's cluster takes its namespace from the target of its first call,
// bounded in length; a chain that serves two targets shares its breakers
// under the first one's.
func TestClusterNamespaceComesFromTheFirstTarget(t *testing.T) {
	srv := redistest.Start(t)
	cfg, err := grpcmw.ParseConfig([]byte(strings.Replace(yamlFor(srv), "namespace: three-pods", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	be1, be2 := newBackend(t), newBackend(t)
	be1.answer(codes.OK)
	be2.answer(codes.OK)
	newChain := func() *grpcmw.Chain {
		chain, err := grpcmw.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(chain.Close)
		return chain
	}
	// call makes one call through chain to target, whose connections reach
	// the backend at addr.
	call := func(chain *grpcmw.Chain, target, addr string) {
		t.Helper()
		conn, err := grpc.NewClient(target, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return new(net.Dialer).DialContext(ctx, "tcp", addr)
			}))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := testgrpc.NewTestServiceClient(conn).UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("two targets", func(t *testing.T) {
		chain := newChain()
		if chain.Cluster() != nil {
			t.Fatal("a cluster before the first call: its namespace is not known yet")
		}
		call(chain, be2.addr, be2.addr)
		call(chain, be1.addr, be1.addr)
		if got, want := chain.Cluster().Config().Namespace, "meshless@dns:///"+be2.addr; got != want {
			t.Fatalf("namespace %q, want %q (the first call's target)", got, want)
		}
		if b, ok := chain.Breaker(clusterKey); !ok || coord.Of(b).Window().Calls != 2 {
			t.Fatal("want one breaker for both targets, with both calls")
		}
		// Writing the default namespace is sharing on purpose: another
		// cluster, which a reload cannot switch to.
		written, err := grpcmw.ParseConfig([]byte(yamlFor(srv)))
		if err != nil {
			t.Fatal(err)
		}
		written.Cluster.Namespace = new(string)
		*written.Cluster.Namespace = "meshless"
		if err := chain.Reload(written); err == nil || !strings.Contains(err.Error(), "the cluster section is read when the chain is built") {
			t.Fatalf("Reload writing the namespace: %v", err)
		}
		if err := chain.Reload(cfg); err != nil {
			t.Fatalf("Reload with the same section: %v", err)
		}
	})

	t.Run("a stream first", func(t *testing.T) {
		chain := newChain()
		conn, err := grpc.NewClient(be1.addr, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		s, err := testgrpc.NewTestServiceClient(conn).StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("stream: %v, want its end", err)
		}
		if cl := chain.Cluster(); cl == nil || cl.Config().Namespace != "meshless@dns:///"+be1.addr {
			t.Fatalf("cluster %v after a stream: want it in the stream's target's namespace", cl)
		}
	})

	t.Run("closed before its first call", func(t *testing.T) {
		chain := newChain()
		chain.Close()
		call(chain, be1.addr, be1.addr)
		if chain.Cluster() != nil {
			t.Fatal("a closed chain started a cluster")
		}
	})

	t.Run("long targets", func(t *testing.T) {
		long := "passthrough:///" + strings.Repeat("a-very-long-service-name.", 12) + "example:443"
		var names []string
		for _, target := range []string{long, long + "x", long} {
			chain := newChain()
			call(chain, target, be1.addr)
			ns := chain.Cluster().Config().Namespace
			if len(ns) > 80 || !strings.HasPrefix(ns, "meshless@passthrough:///a-very-long") {
				t.Fatalf("namespace %q (%d bytes): want a readable start and at most 80 bytes", ns, len(ns))
			}
			names = append(names, ns)
		}
		if names[0] == names[1] || names[0] != names[2] {
			t.Fatalf("namespaces %q: want two targets that differ at their end apart, one target alike", names)
		}
	})
}
