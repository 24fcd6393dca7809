package outlier_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/memnet"
)

// sidePod is a test-service server on an in-memory listener whose unary
// and server-streaming calls take a fixed time.
type sidePod struct {
	testgrpc.UnimplementedTestServiceServer
	delay time.Duration
}

func (p *sidePod) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	time.Sleep(p.delay)
	return &testgrpc.SimpleResponse{}, nil
}

func (p *sidePod) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	time.Sleep(p.delay)
	return &testgrpc.Empty{}, nil
}

// StreamingOutputCall sends one response at once, then ends after delay.
func (p *sidePod) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
	if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
		return err
	}
	time.Sleep(p.delay)
	return nil
}

// sideNet is a set of in-memory pods by address, with the servers to stop.
type sideNet struct {
	mu   sync.Mutex // lis: a channel dials while the next one is set up
	lis  map[string]*memnet.Listener
	srvs []*grpc.Server
}

func (n *sideNet) add(addr string, delay time.Duration) resolver.Endpoint {
	l := memnet.Listen()
	n.mu.Lock()
	if n.lis == nil {
		n.lis = map[string]*memnet.Listener{}
	}
	n.lis[addr] = l
	n.mu.Unlock()
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &sidePod{delay: delay})
	go func() { _ = srv.Serve(l) }()
	n.srvs = append(n.srvs, srv)
	return resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}}
}

func (n *sideNet) dialer() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		l := n.lis[addr]
		n.mu.Unlock()
		return l.DialContext(ctx)
	})
}

func (n *sideNet) stop() {
	for _, s := range n.srvs {
		s.Stop()
	}
}

// sideSlowYAML: a meshless chain with the slow-call detector alone, 40 ms.
const sideSlowYAML = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
outlierDetection:
  interval: 10s
  baseEjectionTime: 1h
  maxEjectionTime: 1h
  consecutiveFailures: 0
  failurePercentage: { enabled: false }
  successRate: { enabled: false }
  slowCalls: { durationThreshold: 40ms, rateThreshold: 50, requestVolume: 1 }
`

// plainOutlierConn dials, without meshless's interceptor, a channel with the
// outlier balancer (slow calls alone, 40 ms, one call enough to judge) over
// two pods that answer at once; it returns the client, the Monitor and a
// close function.
func plainOutlierConn(t *testing.T, n *sideNet, scheme string) (testgrpc.TestServiceClient, *outlier.Monitor, func()) {
	t.Helper()
	mon, err := outlier.NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	cfg := outlier.Config{
		Interval:            time.Second,
		BaseEjectionTime:    time.Hour,
		MaxEjectionTime:     time.Hour,
		ConsecutiveFailures: outlier.ConsecutiveFailures{Disabled: true},
		FailurePercentage:   outlier.FailurePercentage{Disabled: true},
		SuccessRate:         outlier.SuccessRate{Disabled: true},
		SlowCalls:           outlier.SlowCalls{DurationThreshold: 40 * time.Millisecond, RateThreshold: 50, RequestVolume: 1},
		Monitor:             mon.Name(),
	}
	sc, err := outlier.ServiceConfigJSON(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st resolver.State
	for i := range 2 {
		st.Endpoints = append(st.Endpoints, n.add(fmt.Sprintf("%s-%d", scheme, i), 0))
	}
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(st)
	conn, err := grpc.NewClient(scheme+":///svc", grpc.WithResolvers(r), n.dialer(),
		grpc.WithDefaultServiceConfig(sc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	conn.Connect()
	return testgrpc.NewTestServiceClient(conn), mon, func() { _ = conn.Close(); mon.Close() }
}

// meshlessConn dials one pod taking delay through a meshless chain with the
// slow-call detector on, with extra dial options (interceptors inside
// meshless's).
func meshlessConn(t *testing.T, n *sideNet, scheme string, delay time.Duration, extra ...grpc.DialOption) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(sideSlowYAML))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(resolver.State{Endpoints: []resolver.Endpoint{n.add(scheme+"-0", delay)}})
	opts := append(chain.DialOptions(), grpc.WithResolvers(r), n.dialer(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(scheme+":///svc", append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	conn.Connect()
	return testgrpc.NewTestServiceClient(conn), chain, func() { _ = conn.Close(); chain.Close() }
}

// A unary call through a meshless chain whose attempt's context reaches
// another channel — here an interceptor installed inside meshless's (an
// audit log, a side call) makes a call on a plain gRPC channel that has the
// outlier balancer, with the attempt's context, after the attempt's own
// invoker returned. The side call's pick finds the meshless attempt's note
// and notes its own endpoint in it, replacing the endpoint the meshless
// attempt was served by: the meshless attempt's time (100 ms, slow) is then
// told to the other channel's endpoint, which answered at once, and that
// endpoint is ejected for slow calls.
func TestAnAttemptsTimeIsNotToldToAnotherChannelsEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n sideNet
		defer n.stop()
		side, sideMon, closeSide := plainOutlierConn(t, &n, "side")
		defer closeSide()
		audit := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if _, serr := side.EmptyCall(ctx, &testgrpc.Empty{}); serr != nil {
				t.Errorf("side call: %v", serr)
			}
			return err
		}
		client, _, closeMain := meshlessConn(t, &n, "main", 100*time.Millisecond, grpc.WithChainUnaryInterceptor(audit))
		defer closeMain()
		synctest.Wait() // every pod READY
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the side channel's interval ends
		synctest.Wait()
		if got := sideMon.Ejected(); len(got) != 0 {
			t.Fatalf("the side channel ejected %v for slow calls; its pods answer at once: the meshless attempt's 100ms was told to its endpoint", got)
		}
	})
}

// The same through a stream: a client reads a meshless stream and, with the
// stream's context (cs.Context()), calls another channel that has the outlier
// balancer but not meshless's interceptor. The stream's attempt note is
// found by that call's pick, which replaces the stream's endpoint in it: the
// stream's whole life (100 ms) is told to the other channel's endpoint.
func TestAStreamsTimeIsNotToldToAnotherChannelsEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n sideNet
		defer n.stop()
		side, sideMon, closeSide := plainOutlierConn(t, &n, "side")
		defer closeSide()
		client, _, closeMain := meshlessConn(t, &n, "main", 100*time.Millisecond)
		defer closeMain()
		synctest.Wait()
		s, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		if _, err := side.EmptyCall(s.Context(), &testgrpc.Empty{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("stream end: %v, want io.EOF", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := sideMon.Ejected(); len(got) != 0 {
			t.Fatalf("the side channel ejected %v for slow calls; its pods answer at once: the meshless stream's 100ms was told to its endpoint", got)
		}
	})
}

// An interceptor inside meshless's that mirrors each call (shadow traffic)
// on the same channel, concurrently, with the attempt's context: two picks
// on two goroutines write the same unsynchronised note (run with -race).
