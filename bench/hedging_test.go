package bench

import (
	"context"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/test/bufconn"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// tailServer answers each request after a latency drawn from a seeded
// source: uniform in [5ms, 15ms], except for 5 % of requests, 50× slower
// (500ms). Each request draws anew, so a hedged copy is slow with the same
// 5 % chance: the tail comes from the backend, not from the request. It
// stops working on a request whose context ends, and counts requests and
// busy time.
type tailServer struct {
	testgrpc.UnimplementedTestServiceServer
	mu       sync.Mutex
	rnd      *rand.Rand
	requests atomic.Int64
	busy     atomic.Int64 // nanoseconds of work, cancelled work included
}

func (s *tailServer) latency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := 5*time.Millisecond + time.Duration(s.rnd.Int64N(int64(10*time.Millisecond)))
	if s.rnd.Float64() < 0.05 {
		d = 500 * time.Millisecond
	}
	return d
}

func (s *tailServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.requests.Add(1)
	start := time.Now()
	defer func() { s.busy.Add(int64(time.Since(start))) }()
	select {
	case <-time.After(s.latency()):
		return &testgrpc.SimpleResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type tailResult struct {
	name                 string
	p50, p99, p999, mean time.Duration
	requestsPerCall      float64
	busyPerCall          time.Duration
}

// runTail makes calls sequential calls through a meshless chain built
// from yamlConfig against a tailServer, in memory, in a synctest bubble:
// every duration is virtual time, exact and reproducible.
func runTail(t *testing.T, name, yamlConfig string, calls int) (res tailResult) {
	synctest.Test(t, func(t *testing.T) {
		srv := &tailServer{rnd: rand.New(rand.NewPCG(14, 11))}
		lis := memnet.Listen() // not bufconn: see package memnet
		gs := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(gs, srv)
		go func() { _ = gs.Serve(lis) }()
		defer gs.Stop()
		cfg, err := grpcmw.ParseConfig([]byte(yamlConfig))
		if err != nil {
			t.Fatal(err)
		}
		chain, err := grpcmw.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer chain.Close()
		conn, err := grpc.NewClient("passthrough:///bufnet", append(chain.DialOptions(),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := testgrpc.NewTestServiceClient(conn)
		durs := make([]time.Duration, 0, calls)
		var total time.Duration
		for range calls {
			start := time.Now()
			if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			d := time.Since(start)
			durs = append(durs, d)
			total += d
		}
		synctest.Wait() // the cancelled copies' work is counted
		slices.Sort(durs)
		q := func(p float64) time.Duration { return durs[int(p*float64(len(durs)-1))] }
		res = tailResult{name: name, p50: q(0.50), p99: q(0.99), p999: q(0.999), mean: total / time.Duration(calls),
			requestsPerCall: float64(srv.requests.Load()) / float64(calls),
			busyPerCall:     time.Duration(srv.busy.Load() / int64(calls))}
	})
	return res
}

const tailBase = `
defaults:
  retry: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  circuitBreaker: { enabled: false }
`

// B11: hedging's p99 against no hedging on a backend with a slow tail, in
// virtual time (synctest), the same calls and the same latency draws for
// every variant. Target: p99 cut ≥ 5× at ≤ 10 % extra backend load.
func TestB11HedgingTail(t *testing.T) {
	calls := 4000 // the figures of docs/benchmarks.md
	if raceEnabled {
		calls = 1000 // the same check, in a quarter of the time
	}
	none := runTail(t, "no hedging", tailBase, calls)
	results := []tailResult{none}
	for _, v := range []struct{ name, hedging string }{
		{"hedging 2 × 15ms", "{ maxAttempts: 2, hedgingDelay: 15ms }"},
		{"hedging 3 × 15ms", "{ maxAttempts: 3, hedgingDelay: 15ms }"},
		{"hedging 2 × 10ms", "{ maxAttempts: 2, hedgingDelay: 10ms }"},
		{"hedging 2 × 0s", "{ maxAttempts: 2, hedgingDelay: 0s }"},
	} {
		results = append(results, runTail(t, v.name, tailBase+"  hedging: "+v.hedging+"\n", calls))
	}
	t.Logf("%d sequential calls each, virtual time (synctest), 5 %% of requests 500ms, the rest 5–15ms", calls)
	t.Logf("| variant | p50 | p99 | p99.9 | mean | backend requests / call | backend busy time / call | p99 cut | extra load (requests) | extra load (busy time) |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		t.Logf("| %s | %v | %v | %v | %v | %.3f | %v | %.1f× | %+.1f %% | %+.1f %% |", r.name, r.p50, r.p99, r.p999, r.mean.Round(time.Microsecond),
			r.requestsPerCall, r.busyPerCall.Round(time.Microsecond), float64(none.p99)/float64(r.p99),
			100*(r.requestsPerCall/none.requestsPerCall-1), 100*(float64(r.busyPerCall)/float64(none.busyPerCall)-1))
	}
	h := results[1] // the recommended setting: hedgingDelay at the fast answers' ceiling
	if cut := float64(none.p99) / float64(h.p99); cut < 5 || h.requestsPerCall > 1.10 {
		t.Errorf("%s: p99 cut %.1f×, %.3f requests per call; B11 wants ≥ 5× at ≤ 1.10", h.name, cut, h.requestsPerCall)
	}
}

// What hedging costs a call that needs no hedge: the first copy answers
// long before hedgingDelay. Same run, bufconn, the default chain otherwise.
func BenchmarkHedgingOverhead(b *testing.B) {
	lis := bufconn.Listen(1 << 20)
	startServer(b, lis)
	dial := func(b *testing.B, yamlConfig string) *grpc.ClientConn {
		chain := chainOf(b, yamlConfig) // closed after conn
		conn, err := grpc.NewClient("passthrough:///bufnet", append(chain.DialOptions(),
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	b.Run("retry", func(b *testing.B) { benchClient(b, dial(b, "")) })
	b.Run("hedging", func(b *testing.B) {
		benchClient(b, dial(b, "defaults: { hedging: { maxAttempts: 3, hedgingDelay: 1s } }"))
	})
}

// The interceptor alone around an invoker that answers at once: what
// hedging adds to a call that needs no hedge, without gRPC's own cost.
func BenchmarkHedgingInterceptorOnly(b *testing.B) {
	noop := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	req, reply := &testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}
	for _, v := range []struct{ name, yaml string }{
		{"retry", ""},
		{"hedging", "defaults: { hedging: { maxAttempts: 3, hedgingDelay: 1s } }"},
	} {
		b.Run(v.name, func(b *testing.B) {
			icpt := chainOf(b, v.yaml).UnaryClientInterceptor()
			b.ReportAllocs()
			for b.Loop() {
				if err := icpt(ctx, "/grpc.testing.TestService/UnaryCall", req, reply, nil, noop); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The peer: failsafe-go's hedge policy (3 copies at most, 1s apart)
	// around the same invoker, which answers at once.
	b.Run("failsafe-hedge", func(b *testing.B) {
		hp := hedgepolicy.NewBuilderWithDelay[any](time.Second).WithMaxHedges(2).Build()
		exec := failsafe.With[any](hp)
		b.ReportAllocs()
		for b.Loop() {
			if err := exec.RunWithExecution(func(e failsafe.Execution[any]) error {
				return noop(e.Context(), "/grpc.testing.TestService/UnaryCall", req, reply, nil)
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
