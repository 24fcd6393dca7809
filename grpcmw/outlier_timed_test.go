package grpcmw_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/resilience"
)

// slowCallsYAML turns on the slow-call detector alone, with a 40 ms
// threshold; retries and the breaker are off, so that each call is one
// attempt.
const slowCallsYAML = `
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
  slowCalls: { durationThreshold: 40ms, rateThreshold: 50, requestVolume: 8 }
`

// Issue 24 item 4: through the chain's interceptor, the outlier balancer
// times a unary call with the engine's readings of the clock (the attempt's
// start and end), not its own: a pod slower than slowCalls.durationThreshold
// is ejected, and one just under it is not. Inside a testing/synctest
// bubble, where time is the bubble's and the pods' delays exact.
func TestASlowPodIsEjectedOnTheCallPathsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delays := []time.Duration{100 * time.Millisecond, 5 * time.Millisecond, 0, 39 * time.Millisecond}
		var fs []*faultServer
		for _, d := range delays {
			f := new(faultServer)
			f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
				time.Sleep(d)
				return &testgrpc.SimpleResponse{}, nil
			})
			fs = append(fs, f)
		}
		client, chain, stop := inPods(t, slowCallsYAML, fs...)
		defer stop()
		for range 40 { // 10 a pod (round_robin), within one interval
			if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range fs {
			if n := f.calls.Load(); n < 8 {
				t.Fatalf("a pod got %d of the 40 calls, fewer than the detector's request volume", n)
			}
		}
		time.Sleep(10 * time.Second) // the detector's interval ends (the calls took 1.44s)
		synctest.Wait()
		if got := chain.Outlier().Ejected(); !slices.Equal(got, []string{"pod0"}) {
			t.Fatalf("ejected %v, want only pod0 (100ms; pod3 takes 39ms, under the 40ms threshold)", got)
		}
	})
}

// Issue 24 items 2 and 4: with the outlier balancer's slow-call detector on,
// a unary call still reads the clock twice, at its attempt's start and end:
// the picker and the call's Done read none (before, they read it once each).
// So does a hedged call that needs no hedge. Over loopback TCP, on a
// counting clock that the chain gives its balancer too (WithClock).
func TestTheOutlierBalancerReadsNoClockOfItsOwn(t *testing.T) {
	hedged := strings.Replace(slowCallsYAML, "retry: { enabled: false }",
		"hedging: { maxAttempts: 2, hedgingDelay: 10s }", 1)
	for name, yaml := range map[string]string{"unhedged": slowCallsYAML, "hedged": hedged} {
		t.Run(name, func(t *testing.T) { balancerReadsNoClock(t, yaml) })
	}
	// A stream's attempts are timed by the call path too: with the
	// detector on, a stream reads the clock as often as with it off, and
	// at most twice for its attempt (its commit at the first response, its
	// end) and once for the call (its start), a hedged one's included.
	for name, yaml := range map[string]string{"stream": slowCallsYAML, "hedged-stream": hedged} {
		t.Run(name, func(t *testing.T) {
			off := strings.Replace(yaml, "slowCalls: {", "slowCalls: { enabled: false,", 1)
			on, without := streamClockReads(t, yaml), streamClockReads(t, off)
			t.Logf("a stream reads the clock %v times with the slow-call detector on, %v with it off", on, without)
			if on > without {
				t.Fatalf("a stream reads the clock %v times with the slow-call detector on, %v with it off: the balancer reads it too", on, without)
			}
			if on > 3 {
				t.Fatalf("a stream of one attempt reads the clock %v times, want at most 3", on)
			}
		})
	}
}

// streamClockReads returns how many times a server-streaming call of one
// response, read to its end, reads the chain's clock, on the average of 30
// (the balancer's included: the chain gives it its clock).
func streamClockReads(t *testing.T, yaml string) float64 {
	addrs, _, _ := pods(t, 3, func(int) (*testgrpc.SimpleResponse, error) { return &testgrpc.SimpleResponse{}, nil })
	clk := &countingClock{Clock: resilience.SystemClock()}
	client, chain := dialPods(t, addrs, yaml, grpcmw.WithClock(clk))
	if chain.Outlier() == nil {
		t.Fatal("no outlier balancer")
	}
	stream := func() {
		s, err := client.StreamingOutputCall(t.Context(), &testgrpc.StreamingOutputCallRequest{
			ResponseParameters: []*testgrpc.ResponseParameters{{}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("the stream's end: %v, want io.EOF", err)
		}
	}
	for range 3 { // connects, and builds the method's policies
		stream()
	}
	const streams = 30
	before := clk.reads.Load()
	for range streams {
		stream()
	}
	return float64(clk.reads.Load()-before) / streams
}

func balancerReadsNoClock(t *testing.T, yaml string) {
	addrs, _, _ := pods(t, 3, func(int) (*testgrpc.SimpleResponse, error) { return &testgrpc.SimpleResponse{}, nil })
	clk := &countingClock{Clock: resilience.SystemClock()}
	client, chain := dialPods(t, addrs, yaml, grpcmw.WithClock(clk))
	for range 3 { // connects, and builds the method's policies
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if chain.Outlier() == nil {
		t.Fatal("no outlier balancer")
	}
	const calls = 30
	before := clk.reads.Load()
	for range calls {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	n := clk.reads.Load() - before
	t.Logf("%d clock reads in %d calls", n, calls)
	if n > 2*calls {
		t.Fatalf("%d calls read the clock %d times, want at most 2 a call", calls, n)
	}
}

// tookRecorder is a picked endpoint (picknote.Endpoint) that records what
// it is told.
type tookRecorder struct {
	mu    sync.Mutex
	calls int
	err   error
	took  time.Duration
}

func (r *tookRecorder) Took(err error, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.err, r.took = r.calls+1, err, took
}

// Issue 24 items 2 and 4: each copy of a hedged call is timed by the
// engine too, in its own note: the copy the hedge sent is told its own
// time, from its start to its answer, and the first copy, cancelled when
// the hedge won, its own. In a testing/synctest bubble, with an invoker
// that picks as gRPC would: it notes an endpoint of its own per copy.
func TestEachHedgedCopyIsTimedByTheCallPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chain := chainFor(t, `
defaults:
  circuitBreaker: { enabled: false }
  hedging: { maxAttempts: 2, hedgingDelay: 10ms }
outlierDetection: {}
`)
		var mu sync.Mutex
		eps := map[*picknote.Note]*tookRecorder{}
		endpoints := make([]*tookRecorder, 3) // by copy
		invoke := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			note := picknote.From(ctx)
			if note == nil {
				t.Error("a hedged copy's context carries no note")
				return nil
			}
			mu.Lock()
			n := len(eps) + 1
			if _, ok := eps[note]; ok {
				mu.Unlock()
				t.Error("two copies share a note")
				return nil
			}
			e := new(tookRecorder)
			eps[note], endpoints[n] = e, e
			mu.Unlock()
			note.Picked(e)
			if n == 1 {
				<-ctx.Done() // the hedge wins
				return status.FromContextError(ctx.Err()).Err()
			}
			time.Sleep(5 * time.Millisecond)
			return nil
		}
		icpt := chain.UnaryClientInterceptor()
		if err := icpt(t.Context(), "/grpc.testing.TestService/UnaryCall", &testgrpc.SimpleRequest{},
			&testgrpc.SimpleResponse{}, nil, invoke); err != nil {
			t.Fatal(err)
		}
		if len(eps) != 2 {
			t.Fatalf("%d copies, want 2", len(eps))
		}
		first, hedge := endpoints[1], endpoints[2]
		if hedge.calls != 1 || hedge.err != nil || hedge.took != 5*time.Millisecond {
			t.Errorf("the hedge's endpoint was told %d times, last %v after %v; want once, nil after 5ms", hedge.calls, hedge.err, hedge.took)
		}
		if first.calls != 1 || status.Code(first.err) != codes.Canceled || first.took != 15*time.Millisecond {
			t.Errorf("the first copy's endpoint was told %d times, last %v after %v; want once, Canceled after 15ms", first.calls, first.err, first.took)
		}
	})
}

// Issue 24 items 2 and 4, for streams: each attempt of a stream made
// through the chain's interceptor, each copy of a hedged stream, is timed
// by the engine in a note of its own, from its start to its end, and the
// endpoint its pick noted is told the time and the stream's status; the
// picker reads no clock. The pick runs on the caller's goroutine, the end
// on another (a shared note). In a testing/synctest bubble, with a streamer
// that picks as gRPC would.
func TestEachStreamAttemptIsTimedByTheCallPath(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	for _, c := range []struct {
		name, yaml string
		end        error // how the stream ends, after its response
		want       error // what the endpoint is told
		retried    bool  // the first attempt fails before its response, after 2ms, and is retried
	}{
		{"stream", "defaults: { circuitBreaker: { enabled: false } }", io.EOF, nil, false},
		{"stream-failing", "defaults: { circuitBreaker: { enabled: false }, retry: { enabled: false } }", unavailable, unavailable, false},
		{"stream-retried", "defaults: { circuitBreaker: { enabled: false } }", io.EOF, nil, true},
		{"hedged-stream", "defaults: { circuitBreaker: { enabled: false }, hedging: { maxAttempts: 2, hedgingDelay: 10ms } }", io.EOF, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				chain := chainFor(t, c.yaml+"\noutlierDetection: {}\n")
				var mu sync.Mutex
				var eps []*tookRecorder
				var notes []*picknote.Note
				streamer := func(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
					note := picknote.From(ctx)
					if note == nil {
						t.Error("a stream attempt's context carries no note")
						return nil, status.Error(codes.Internal, "no note")
					}
					e := new(tookRecorder)
					mu.Lock()
					if slices.Contains(notes, note) {
						t.Error("two attempts of a stream share a note")
					}
					eps, notes = append(eps, e), append(notes, note)
					first := len(eps) == 1
					mu.Unlock()
					note.Picked(e)
					if c.retried && first {
						return &timedStream{ctx: ctx, fail: unavailable}, nil
					}
					return &timedStream{ctx: ctx, end: c.end}, nil
				}
				desc := &grpc.StreamDesc{StreamName: "StreamingOutputCall", ServerStreams: true}
				cs, err := chain.StreamClientInterceptor()(t.Context(), desc, nil,
					"/grpc.testing.TestService/StreamingOutputCall", streamer)
				if err != nil {
					t.Fatal(err)
				}
				if err := cs.SendMsg(&testgrpc.StreamingOutputCallRequest{}); err != nil {
					t.Fatal(err)
				}
				if err := cs.CloseSend(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error)
				go func() { // the stream is read, and ends, on another goroutine
					if err := cs.RecvMsg(new(testgrpc.StreamingOutputCallResponse)); err != nil {
						done <- err
						return
					}
					done <- cs.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
				}()
				if err := <-done; err != c.end {
					t.Fatalf("the stream ended with %v, want %v", err, c.end)
				}
				mu.Lock()
				defer mu.Unlock()
				want := 1
				if c.retried {
					want = 2
				}
				if len(eps) != want {
					t.Fatalf("%d attempts, want %d", len(eps), want)
				}
				if c.retried {
					e := eps[0]
					e.mu.Lock()
					if e.calls != 1 || status.Code(e.err) != codes.Unavailable || e.took != 2*time.Millisecond {
						t.Errorf("the failed attempt's endpoint was told %d times, last %v after %v; want once, Unavailable after 2ms", e.calls, e.err, e.took)
					}
					e.mu.Unlock()
				}
				e := eps[len(eps)-1]
				e.mu.Lock()
				defer e.mu.Unlock()
				if e.calls != 1 || status.Code(e.err) != status.Code(c.want) || e.took != 7*time.Millisecond {
					t.Errorf("the endpoint was told %d times, last %v after %v; want once, %v after 7ms", e.calls, e.err, e.took, c.want)
				}
			})
		})
	}
}

// timedStream is a server stream that answers one response 3 ms after it
// is first read, and ends 4 ms later with end; or, with fail, fails with
// it 2 ms after it is first read.
type timedStream struct {
	ctx  context.Context
	end  error
	fail error
	read int
}

func (s *timedStream) Header() (metadata.MD, error) { return nil, nil }
func (s *timedStream) Trailer() metadata.MD         { return nil }
func (s *timedStream) CloseSend() error             { return nil }
func (s *timedStream) Context() context.Context     { return s.ctx }
func (s *timedStream) SendMsg(any) error            { return nil }

func (s *timedStream) RecvMsg(any) error {
	s.read++
	if s.fail != nil {
		time.Sleep(2 * time.Millisecond)
		return s.fail
	}
	if s.read == 1 {
		time.Sleep(3 * time.Millisecond)
		return nil
	}
	time.Sleep(4 * time.Millisecond)
	return s.end
}

// inPods serves each of fs on a pod of its own (pod0, pod1, …: memnet
// listeners, inside the caller's synctest bubble) behind a manual
// resolver, and returns a client of them through a chain of yamlConfig's,
// every pod READY (so that round_robin spreads calls evenly), and stop.
func inPods(t *testing.T, yamlConfig string, fs ...*faultServer) (testgrpc.TestServiceClient, *grpcmw.Chain, func()) {
	t.Helper()
	lis := map[string]*memnet.Listener{}
	var st resolver.State
	var srvs []*grpc.Server
	for i, f := range fs {
		addr := fmt.Sprintf("pod%d", i)
		l := memnet.Listen()
		lis[addr] = l
		srv := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, f)
		go func() { _ = srv.Serve(l) }()
		srvs = append(srvs, srv)
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}})
	}
	stopServers := func() {
		for _, s := range srvs {
			s.Stop()
		}
	}
	cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
	if err != nil {
		stopServers()
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		stopServers()
		t.Fatal(err)
	}
	r := manual.NewBuilderWithScheme("pods")
	r.InitialState(st)
	conn, err := grpc.NewClient("pods:///svc", append(chain.DialOptions(), grpc.WithResolvers(r),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return lis[addr].DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		chain.Close()
		stopServers()
		t.Fatal(err)
	}
	conn.Connect()
	synctest.Wait()
	return testgrpc.NewTestServiceClient(conn), chain, func() {
		_ = conn.Close()
		stopServers()
		chain.Close()
	}
}
