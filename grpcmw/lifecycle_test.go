package grpcmw_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/otelmw"
)

// Close while a replay of the Redis dead-letter store is in flight, on
// the client the chain dialled for cluster.redis: the queue gives its
// lease on the key back before that client is closed, so that the next
// chain (a reload that builds a new one, another pod) replays the key at
// once, not after the lease's TTL.
func TestCloseDuringAReplayGivesTheRedisLeaseBack(t *testing.T) {
	srv := redistest.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	replaying := make(chan struct{}, 1)
	f := new(faultServer)
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(deadletter.ReplayIDHeader)) == 0 {
			return nil, status.Error(codes.Unavailable, "down") // the live call: deferred
		}
		select { // a replay: held until the chain closes
		case replaying <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	addr, _ := serve(t, f)
	yaml := `
cluster: { redis: { addr: "` + srv.Addr() + `" }, namespace: lease-ns, syncInterval: 1h }
defaults:
  retry: { enabled: false }
  deadLetter: { on: [RETRIES_EXHAUSTED], store: redis, namespace: lease-dl }
`
	chainOn := func() (*grpcmw.Chain, testgrpc.TestServiceClient, func()) {
		client, chain, conn := dial(t, addr, yaml)
		return chain, client, func() { _ = conn.Close() }
	}
	first, client, closeConn := chainOn()
	_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if !errors.Is(err, deadletter.ErrDeferred) {
		closeConn()
		first.Close()
		t.Fatalf("the first call: %v, want it deferred", err)
	}
	closeConn()
	first.Close()

	second, client, closeConn := chainOn()
	defer closeConn()
	if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil { // its connection: the queue replays
		second.Close()
		t.Fatal(err)
	}
	select {
	case <-replaying:
	case <-time.After(10 * time.Second):
		second.Close()
		t.Fatal("no replay within 10s")
	}
	second.Close()
	leases, err := admin.Keys(t.Context(), "lease-dl:dl:*:l").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 0 {
		ttl, _ := admin.PTTL(t.Context(), leases[0]).Result()
		t.Fatalf("after Close the key's lease is still held (%v, for %v more): no other queue can replay it until then", leases, ttl)
	}
}

// A call that still goes through a closed chain's interceptors (its
// connection not closed yet, a reload's old chain) leaves no gauge in the
// observer: a method first called after Close gets a breaker and a
// bulkhead that nothing would ever close, so an observer shared with the
// next chains would report them for the life of the process.
func TestACallAfterCloseLeavesNoGaugeInTheObserver(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	addr, _ := serve(t, new(faultServer))
	client, chain, _ := dial(t, addr, `defaults: { circuitBreaker: { keyBy: method }, bulkhead: { maxConcurrentCalls: 3 } }`,
		grpcmw.WithObserver(obs))
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		chain.Close()
		t.Fatal(err)
	}
	chain.Close()
	if _, err := client.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil { // its first call
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "meshless.circuit_breaker.state" && m.Name != "meshless.bulkhead.limit" {
				continue
			}
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range d.DataPoints {
					if dp.Value != 0 {
						t.Errorf("%s %v = %d after Close", m.Name, dp.Attributes.ToSlice(), dp.Value)
					}
				}
			}
		}
	}
}
