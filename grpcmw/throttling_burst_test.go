package grpcmw_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// barrier holds every call that reaches the server until each call of the
// burst has either reached it or been rejected on the client.
type barrier struct {
	mu      sync.Mutex
	n, seen int
	release chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, release: make(chan struct{})} }

// arrive counts one call of the burst as settled.
func (b *barrier) arrive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen++; b.seen == b.n {
		close(b.release)
	}
}

// A client fans out a burst of concurrent calls to a healthy backend, on all
// defaults, from idle: every call is admitted before any is answered (the
// server answers none until all have reached it or been rejected), then all
// are answered OK. None is throttled: a call in flight is not a refusal.
// Only the timeouts differ from the defaults: on a busy machine (-race, two
// cores) 100 calls may take more than the default 1 s per attempt to all
// reach the server, and a call timed out by its attempt deadline is not what
// this test is about. The server's hold is still bounded by each call's
// deadline (30 s), so a call that never arrives fails the test instead of
// hanging it.
func TestColdBurstToAHealthyBackendIsNotThrottled(t *testing.T) {
	for _, n := range []int{40, 100} { // 100 is the default bulkhead's limit
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := newBarrier(n)
			f := new(faultServer)
			f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
				b.arrive()
				select {
				case <-b.release:
					return &testgrpc.SimpleResponse{}, nil
				case <-ctx.Done():
					return nil, status.FromContextError(ctx.Err()).Err()
				}
			})
			addr, _ := serve(t, f)
			cfg, err := grpcmw.ParseConfig([]byte("defaults:\n  timeout: { perAttempt: 30s, overall: 30s }\n"))
			if err != nil {
				t.Fatal(err)
			}
			chain, err := grpcmw.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			conn, err := grpc.NewClient(addr, append(chain.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// Connect before the burst, without a call: the throttler has
			// seen nothing, and the burst's deadlines do not pay the
			// handshake.
			conn.Connect()
			for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
				if !conn.WaitForStateChange(t.Context(), s) {
					t.Fatalf("connection state %v", s)
				}
			}
			client := testgrpc.NewTestServiceClient(conn)

			var wg sync.WaitGroup
			var throttled, failed atomic.Int64
			var firstErr atomic.Value
			for range n {
				wg.Go(func() {
					_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
					if err == nil {
						return
					}
					firstErr.CompareAndSwap(nil, err.Error())
					if reason := grpcmw.RejectionReason(err); reason != "" {
						b.arrive() // rejected on the client: it never reaches the server
						if reason == grpcmw.ReasonThrottled {
							throttled.Add(1)
						}
					}
					failed.Add(1)
				})
			}
			wg.Wait()
			if throttled.Load() != 0 || failed.Load() != 0 {
				t.Errorf("%d of %d concurrent calls to a healthy backend failed, %d of them THROTTLED, want none (first: %v)",
					failed.Load(), n, throttled.Load(), firstErr.Load())
			}
			if got := f.calls.Load(); got != int32(n) {
				t.Errorf("the server saw %d calls, want %d", got, n)
			}
		})
	}
}
