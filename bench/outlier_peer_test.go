package bench

import (
	"context"
	"fmt"
	"net"
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

// odBackend counts its calls and answers with code (OK: success).
type odBackend struct {
	testgrpc.UnimplementedTestServiceServer
	calls atomic.Int64
	code  codes.Code
}

func (b *odBackend) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	b.calls.Add(1)
	if b.code != codes.OK {
		return nil, status.Error(b.code, "no such thing")
	}
	return &testgrpc.Empty{}, nil
}

// TestOutlierPeerNotFound sends the same traffic through grpc-go's xDS
// outlier detection (gRFC A50, outlier_detection_experimental) and through
// meshless_outlier, with the same failure-percentage settings, to four
// backends of which one answers NOT_FOUND to everything. A50 counts every
// error as a failure and ejects it; meshless counts NOT_FOUND as a healthy
// answer and does not. docs/outlier.md quotes the counts this logs.
//
// It runs in a testing/synctest bubble, the backends on internal/memnet:
// both balancers' interval timers (grpc-go's time.AfterFunc, meshless's
// system clock) run on the bubble's time, so the traffic per interval is
// what the test sends, whatever the machine's load.
func TestOutlierPeerNotFound(t *testing.T) {
	const interval = 500 * time.Millisecond
	xdsSC := `{"loadBalancingConfig":[{"outlier_detection_experimental":{` +
		`"interval":"0.5s","baseEjectionTime":"30s","maxEjectionTime":"300s","maxEjectionPercent":50,` +
		`"failurePercentageEjection":{"threshold":85,"enforcementPercentage":100,"minimumHosts":3,"requestVolume":5},` +
		`"childPolicy":[{"round_robin":{}}]}}]}`
	meshlessSC, err := outlier.ServiceConfigJSON(outlier.Config{
		Interval:            interval,
		MaxEjectionPercent:  50,
		FailurePercentage:   outlier.FailurePercentage{Threshold: 85, MinimumHosts: 3, RequestVolume: 5},
		ConsecutiveFailures: outlier.ConsecutiveFailures{Disabled: true},
		SuccessRate:         outlier.SuccessRate{Disabled: true},
		SlowCalls:           outlier.SlowCalls{Disabled: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sc  string
		wantEject bool
	}{
		{name: "grpc-go outlier_detection_experimental", sc: xdsSC, wantEject: true},
		{name: "meshless_outlier", sc: meshlessSC, wantEject: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				backends := make([]*odBackend, 4)
				listeners := map[string]*memnet.Listener{}
				var st resolver.State
				for i := range backends {
					backends[i] = &odBackend{}
					if i == 1 {
						backends[i].code = codes.NotFound
					}
					lis := memnet.Listen() // not bufconn: see package memnet
					srv := grpc.NewServer()
					testgrpc.RegisterTestServiceServer(srv, backends[i])
					go func() { _ = srv.Serve(lis) }()
					t.Cleanup(srv.Stop)
					addr := fmt.Sprintf("backend%d", i)
					listeners[addr] = lis
					st.Addresses = append(st.Addresses, resolver.Address{Addr: addr})
				}
				r := manual.NewBuilderWithScheme("peer")
				r.InitialState(st)
				cc, err := grpc.NewClient(r.Scheme()+":///peer",
					grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
						return listeners[addr].DialContext(ctx)
					}),
					grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(tc.sc))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				client := testgrpc.NewTestServiceClient(cc)
				call := func(n int) {
					for range n {
						_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{}, grpc.WaitForReady(true))
					}
				}
				counts := func() (c [4]int64) {
					for i, b := range backends {
						c[i] = b.calls.Swap(0)
					}
					return c
				}
				// Warm-up: four intervals of traffic, 40 calls every eighth
				// of one (80 per backend per interval, well above the
				// request volume), then 400 calls counted.
				for range 4 * 8 {
					call(40)
					time.Sleep(interval / 8)
				}
				warm := counts()
				call(400)
				got := counts()
				t.Logf("%s: NOT_FOUND backend is #1; calls per backend during warm-up %v, in the next 400 calls %v", tc.name, warm, got)
				if ejected := got[1] == 0; ejected != tc.wantEject {
					t.Fatalf("NOT_FOUND backend ejected = %v, want %v (calls %v)", ejected, tc.wantEject, got)
				}
			})
		})
	}
}
