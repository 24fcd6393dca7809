package outlier_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/memnet"
)

// restart stops pod i's server, which drops its connections, and serves
// the pod again on a new listener; down leaves it stopped.
func (c *churnNet) restart(i int, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := c.addr(i)
	c.srvs[i].Stop()
	l := memnet.Listen()
	c.lis[addr] = l
	if down {
		_ = l.Close()
		return
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, c.pods[addr])
	go func() { _ = srv.Serve(l) }()
	c.srvs[i] = srv
}

// An ejected endpoint whose connection dropped and came back during its
// ejection is hidden from the child as one whose connection stayed up:
// TRANSIENT_FAILURE. When it is the only READY endpoint, a call that does
// not wait for ready fails at once with UNAVAILABLE, as it does when the
// ejected endpoint kept its connection, rather than waiting (for the rest
// of the ejection, or until its deadline) on a child that believes the
// endpoint is still connecting.
func TestAnEjectedEndpointThatReconnectedStaysOut(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		name := map[bool]string{false: "connection kept", true: "reconnected"}[reconnect]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mon, err := outlier.NewMonitor()
				if err != nil {
					t.Fatal(err)
				}
				defer mon.Close()
				cfg := only(func(c *outlier.Config) { c.ConsecutiveFailures = outlier.ConsecutiveFailures{Threshold: 1} })
				cfg.BaseEjectionTime, cfg.MaxEjectionTime = time.Hour, time.Hour
				cfg.Monitor = mon.Name()
				n := newChurnNet(t, map[bool]string{false: "kept", true: "reconnected"}[reconnect], 2, cfg)
				defer n.close()
				synctest.Wait() // every pod READY
				n.pods[n.addr(0)].code.Store(int32(codes.Unavailable))
				client := testgrpc.NewTestServiceClient(n.cc)
				for range 2 {
					_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
				}
				synctest.Wait()
				if !mon.IsEjected(n.addr(0)) {
					t.Fatalf("pod 0 not ejected (ejected %v)", mon.Ejected())
				}
				n.pods[n.addr(0)].code.Store(int32(codes.OK))
				if reconnect {
					n.restart(0, false)
					time.Sleep(time.Minute) // the reconnection's backoff passes
					synctest.Wait()
				}
				n.restart(1, true) // pod 1 goes down: pod 0, ejected, is the only READY one
				time.Sleep(time.Minute)
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				start := time.Now()
				_, err = client.EmptyCall(ctx, &testgrpc.Empty{})
				if status.Code(err) != codes.Unavailable || time.Since(start) != 0 {
					t.Fatalf("a call failed after %v with %v, want UNAVAILABLE at once: no endpoint serves", time.Since(start), err)
				}
				if !mon.IsEjected(n.addr(0)) {
					t.Fatal("pod 0 returned before its ejection (1 h) ended")
				}
			})
		})
	}
}
