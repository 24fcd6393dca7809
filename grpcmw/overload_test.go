package grpcmw_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// poolServer is a backend of fixed capacity: workers calls at a time, each
// holding a worker for work; queue more wait for one, in order; the calls
// beyond are shed at once, with UNAVAILABLE or, with pushback, with
// RESOURCE_EXHAUSTED and a grpc-retry-pushback-ms trailer. Latency grows
// with the queue. Run in a synctest bubble, its time is virtual.
type poolServer struct {
	testgrpc.UnimplementedTestServiceServer
	work     time.Duration
	pushback bool
	admitted chan struct{}
	workers  chan struct{}
	received atomic.Int64
}

func newPoolServer(workers, queue int, work time.Duration, pushback bool) *poolServer {
	return &poolServer{work: work, pushback: pushback,
		admitted: make(chan struct{}, workers+queue), workers: make(chan struct{}, workers)}
}

func (s *poolServer) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.received.Add(1)
	select {
	case s.admitted <- struct{}{}:
	default:
		if s.pushback {
			drain := s.work * time.Duration((cap(s.admitted)+cap(s.workers)-1)/cap(s.workers))
			_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcmw.PushbackTrailer, strconv.FormatInt(drain.Milliseconds(), 10)))
			return nil, status.Error(codes.ResourceExhausted, "overloaded")
		}
		return nil, status.Error(codes.Unavailable, "overloaded")
	}
	defer func() { <-s.admitted }()
	select {
	case s.workers <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-s.workers }()
	time.Sleep(s.work) // the worker is held to the end, as real work holds it
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return &testgrpc.SimpleResponse{}, nil
}

// loadResult is what a client got from an open-loop load.
type loadResult struct {
	calls, ok int
	reached   int64 // requests the backend received
	p99       time.Duration
	elapsed   time.Duration
}

func (r loadResult) goodput() float64 { return float64(r.ok) / r.elapsed.Seconds() }
func (r loadResult) perCall() float64 { return float64(r.reached) / float64(r.calls) }

func (r loadResult) String() string {
	return fmt.Sprintf("%.0f OK/s (%d of %d calls), p99 %v, %.2f backend requests per call", r.goodput(), r.ok, r.calls, r.p99, r.perCall())
}

// offerLoad runs, in the calling synctest bubble, a poolServer over memnet
// and a client (through chain when it is not nil, with deadline per call
// otherwise) that starts rate calls a second for d, each in its own
// goroutine, whatever the answers.
func offerLoad(t *testing.T, srv *poolServer, chain *grpcmw.Chain, deadline time.Duration, rate float64, d time.Duration) loadResult {
	t.Helper()
	lis := memnet.Listen()
	gs := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}
	if chain != nil {
		opts = append(opts, chain.DialOptions()...)
	}
	conn, err := grpc.NewClient("passthrough:///mem", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)

	n := int(rate * d.Seconds())
	lat := make([]time.Duration, n)
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if wait := start.Add(time.Duration(float64(i) / rate * float64(time.Second))).Sub(time.Now()); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			ctx := t.Context()
			if chain == nil {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			began := time.Now()
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			lat[i] = time.Since(began)
			if err == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return loadResult{calls: n, ok: int(ok.Load()), reached: srv.received.Load(), p99: lat[(99*n+99)/100-1], elapsed: d}
}

// A user's ordinary configuration: timeouts and 3 attempts on UNAVAILABLE;
// everything else (breaker, adaptive throttling, bulkhead, retry
// throttling) on the defaults.
const ordinaryConfig = `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 100ms, retryableStatusCodes: [UNAVAILABLE] }
  timeout: { perAttempt: 500ms, overall: 1s }
`

// Offered 2.5 times what a backend serves, meshless on its defaults keeps
// serving what the backend can (neither opening its breaker on the backend's
// shedding nor storming it with retries), whether the backend sheds with
// UNAVAILABLE or with RESOURCE_EXHAUSTED and pushback; at 1× it changes
// nothing. Margins: goodput at 2.5× ≥ 0.9 × bare's and ≥ 0.8 × capacity,
// p99 ≤ bare's + 1ms, ≤ 1.1 backend requests per call (at most bare's at
// 1×, where nothing is shed).
func TestGoodputUnderOverloadOnDefaults(t *testing.T) {
	const (
		workers  = 8
		work     = 20 * time.Millisecond
		queue    = 16
		capacity = workers * float64(time.Second/work) // 400 calls a second
		run      = 5 * time.Second
		deadline = 500 * time.Millisecond
	)
	cfg, err := grpcmw.ParseConfig([]byte(ordinaryConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, pushback := range []bool{false, true} {
		for _, load := range []float64{1, 2.5} {
			t.Run(fmt.Sprintf("pushback=%v/load=%gx", pushback, load), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					bare := offerLoad(t, newPoolServer(workers, queue, work, pushback), nil, deadline, load*capacity, run)
					chain, err := grpcmw.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer chain.Close()
					mesh := offerLoad(t, newPoolServer(workers, queue, work, pushback), chain, deadline, load*capacity, run)
					t.Logf("bare:     %v", bare)
					t.Logf("meshless: %v", mesh)
					if load > 1 {
						if mesh.goodput() < 0.9*bare.goodput() || mesh.goodput() < 0.8*capacity {
							t.Errorf("meshless goodput %.0f/s, want ≥ 0.9 × bare's %.0f/s and ≥ 0.8 × capacity %.0f/s", mesh.goodput(), bare.goodput(), capacity)
						}
					} else if mesh.ok < bare.ok {
						t.Errorf("at 1×, meshless answered %d calls OK, bare %d: want at least as many", mesh.ok, bare.ok)
					}
					if mesh.p99 > bare.p99+time.Millisecond {
						t.Errorf("meshless p99 %v, want ≤ bare's %v", mesh.p99, bare.p99)
					}
					if mesh.perCall() > 1.1 {
						t.Errorf("meshless sent %.2f backend requests per call, want ≤ 1.1", mesh.perCall())
					}
				})
			})
		}
	}
}
