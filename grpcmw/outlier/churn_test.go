package outlier_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/memnet"
)

// churnPod is a test-service server on an in-memory listener that answers
// its unary calls with code (OK: a response).
type churnPod struct {
	testgrpc.UnimplementedTestServiceServer
	code  atomic.Int32
	calls atomic.Int64
}

func (p *churnPod) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	p.calls.Add(1)
	if c := codes.Code(p.code.Load()); c != codes.OK {
		return nil, status.Error(c, "pod says so")
	}
	return &testgrpc.Empty{}, nil
}

// churnNet is in-memory pods by address behind a manual resolver, on a
// plain channel (no meshless interceptor) with the outlier balancer.
type churnNet struct {
	mu   sync.Mutex
	lis  map[string]*memnet.Listener
	pods map[string]*churnPod
	srvs []*grpc.Server
	r    *manual.Resolver
	cc   *grpc.ClientConn
}

func newChurnNet(t *testing.T, scheme string, n int, cfg outlier.Config) *churnNet {
	t.Helper()
	c := &churnNet{lis: map[string]*memnet.Listener{}, pods: map[string]*churnPod{}}
	for i := range n {
		addr := fmt.Sprintf("%s-%d", scheme, i)
		l, p := memnet.Listen(), new(churnPod)
		c.lis[addr], c.pods[addr] = l, p
		srv := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, p)
		go func() { _ = srv.Serve(l) }()
		c.srvs = append(c.srvs, srv)
	}
	sc, err := outlier.ServiceConfigJSON(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.r = manual.NewBuilderWithScheme(scheme)
	c.r.InitialState(c.state(n))
	c.cc, err = grpc.NewClient(scheme+":///svc", grpc.WithResolvers(c.r),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c.mu.Lock()
			l := c.lis[addr]
			c.mu.Unlock()
			return l.DialContext(ctx)
		}),
		grpc.WithDefaultServiceConfig(sc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c.cc.Connect()
	return c
}

// state is the resolver state of the pods whose indexes are given (all
// when none is).
func (c *churnNet) state(n int, only ...int) resolver.State {
	if len(only) == 0 {
		for i := range n {
			only = append(only, i)
		}
	}
	var st resolver.State
	for _, i := range only {
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: c.addr(i)}}})
	}
	return st
}

func (c *churnNet) addr(i int) string { return fmt.Sprintf("%s-%d", c.r.Scheme(), i) }

func (c *churnNet) close() {
	_ = c.cc.Close()
	for _, s := range c.srvs {
		s.Stop()
	}
}

// blockingListener records what it hears; its first Ejected waits for
// release, as a listener preempted there would.
type blockingListener struct {
	mu      sync.Mutex
	ev      []string
	hold    chan struct{} // closed to let the held Ejected go on
	held    bool
	holding chan struct{} // closed when the first Ejected is held
}

func (l *blockingListener) Ejected(addr, reason string) {
	l.mu.Lock()
	first := !l.held
	l.held = true
	l.mu.Unlock()
	if first {
		close(l.holding)
		<-l.hold
	}
	l.mu.Lock()
	l.ev = append(l.ev, "ejected "+addr)
	l.mu.Unlock()
}

func (l *blockingListener) Returned(addr string) {
	l.mu.Lock()
	l.ev = append(l.ev, "returned "+addr)
	l.mu.Unlock()
}

func (l *blockingListener) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ev)
}

// An endpoint ejected for consecutive failures and removed by the resolver
// while that ejection is still being reported: the removal's return must
// not overtake the ejection, or the Monitor (and a metrics listener) keeps
// the removed address ejected for ever.
func TestARemovalDoesNotOvertakeTheEjectionItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &blockingListener{hold: make(chan struct{}), holding: make(chan struct{})}
		mon, err := outlier.NewMonitor(outlier.WithListener(l))
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 2} })
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "overtake", 3, cfg)
		defer n.close()
		synctest.Wait() // every pod READY
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 6 { // round_robin: pod 0 fails twice
			_, err := client.EmptyCall(t.Context(), &testgrpc.Empty{})
			_ = err
		}
		<-l.holding // the ejection is being reported
		synctest.Wait()
		go n.r.UpdateState(n.state(3, 1, 2)) // pod 0 leaves
		synctest.Wait()
		close(l.hold)
		synctest.Wait()
		if got := mon.Ejected(); len(got) != 0 {
			t.Errorf("the Monitor has %v ejected after the resolver removed it, want none", got)
		}
		want := []string{"ejected " + n.addr(0), "returned " + n.addr(0)}
		if got := l.events(); !slices.Equal(got, want) {
			t.Errorf("the listener heard %v, want %v", got, want)
		}
	})
}

// The cap keeps one endpoint serving when an endpoint has several
// addresses (a dual-stack pod): pod 0 is one endpoint of three addresses,
// pod 1 one of one. Both fail; the cap (50 %) must leave one of the two
// endpoints in, not count four addresses and eject both.
func TestTheCapCountsEndpointsNotAddresses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mon, err := outlier.NewMonitor()
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 2} })
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "multi", 2, cfg)
		defer n.close()
		n.mu.Lock()
		n.lis["multi-0b"], n.lis["multi-0c"] = n.lis["multi-0"], n.lis["multi-0"]
		n.mu.Unlock()
		n.r.UpdateState(resolver.State{Endpoints: []resolver.Endpoint{
			{Addresses: []resolver.Address{{Addr: "multi-0"}, {Addr: "multi-0b"}, {Addr: "multi-0c"}}},
			{Addresses: []resolver.Address{{Addr: "multi-1"}}},
		}})
		synctest.Wait()
		for i := range 2 {
			n.pods[n.addr(i)].code.Store(int32(codes.Unavailable))
		}
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 8 {
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		synctest.Wait()
		for i := range 2 {
			n.pods[n.addr(i)].code.Store(int32(codes.OK))
		}
		if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
			t.Fatalf("a call failed with %v (ejected %v): the cap left no endpoint in", err, mon.Ejected())
		}
		if got := mon.Ejected(); len(got) != 1 {
			t.Errorf("ejected %v, want one address (50 %% of two endpoints)", got)
		}
	})
}

// Calls, and their Done callbacks, race resolver updates that remove and
// re-add endpoints and config changes that switch the detectors (run with
// -race): no race, no panic, and the Monitor's ejected set is the
// balancer's own at the end.
func TestDoneRacesResolverAndConfigUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mon, err := outlier.NewMonitor()
		if err != nil {
			t.Fatal(err)
		}
		defer mon.Close()
		cfg := only(func(c *outlier.Config) {
			c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1}
			c.SlowCalls = outlier.SlowCalls{DurationThreshold: time.Millisecond, RateThreshold: 1, RequestVolume: 1}
		})
		cfg.Monitor = mon.Name()
		n := newChurnNet(t, "race", 4, cfg)
		defer n.close()
		synctest.Wait()
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		n.pods[n.addr(1)].code.Store(int32(codes.Internal))
		client := testgrpc.NewTestServiceClient(n.cc)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
				}
			})
		}
		configs := []outlier.Config{cfg, only(func(c *outlier.Config) {
			c.FailurePercentage = outlier.FailurePercentage{Threshold: 1, MinimumHosts: 1, RequestVolume: 1}
		})}
		configs[1].Monitor = mon.Name()
		var scs []string
		for _, c := range configs {
			sc, err := outlier.ServiceConfigJSON(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			scs = append(scs, sc)
		}
		sets := [][]int{{0, 1, 2, 3}, {1, 2, 3}, {0, 2, 3}, {0, 1, 2, 3}, {2, 3}}
		for i := range 40 {
			st := n.state(4, sets[i%len(sets)]...)
			st.ServiceConfig = n.r.CC().ParseServiceConfig(scs[i%2])
			n.r.UpdateState(st)
			time.Sleep(300 * time.Millisecond) // fake time: intervals pass
		}
		wg.Wait()
		n.r.UpdateState(n.state(4, 2, 3))
		synctest.Wait()
		for _, a := range mon.Ejected() {
			if a == n.addr(0) || a == n.addr(1) {
				t.Errorf("ejected %v: %s left the resolver", mon.Ejected(), a)
			}
		}
	})
}

// A config from the resolver that names another Monitor moves the
// balancer's ejections to it: the first Monitor does not keep them for
// ever, and the second learns of them, so that it hears their return.
func TestAnotherMonitorTakesTheEjections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mons []*outlier.Monitor
		for range 2 {
			m, err := outlier.NewMonitor()
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			mons = append(mons, m)
		}
		cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
		cfg.Monitor = mons[0].Name()
		n := newChurnNet(t, "moved", 3, cfg)
		defer n.close()
		synctest.Wait()
		n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 3 {
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		synctest.Wait()
		if got := mons[0].Ejected(); !slices.Equal(got, []string{n.addr(0)}) {
			t.Fatalf("the first Monitor has %v ejected, want %s", got, n.addr(0))
		}
		cfg.Monitor = mons[1].Name()
		sc, err := outlier.ServiceConfigJSON(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := n.state(3)
		st.ServiceConfig = n.r.CC().ParseServiceConfig(sc)
		n.r.UpdateState(st)
		synctest.Wait()
		if got := mons[1].Ejected(); !slices.Equal(got, []string{n.addr(0)}) {
			t.Errorf("the second Monitor has %v ejected, want %s", got, n.addr(0))
		}
		st = n.state(3, 1, 2)
		st.ServiceConfig = n.r.CC().ParseServiceConfig(sc)
		n.r.UpdateState(st) // the ejected endpoint leaves
		synctest.Wait()
		for i, m := range mons {
			if got := m.Ejected(); len(got) != 0 {
				t.Errorf("Monitor %d has %v ejected after the endpoint left, want none", i, got)
			}
		}
	})
}
