package clusterlink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/clusterlink"
)

// An engine's cluster whose configuration leaves the namespace unwritten:
// no cluster until the transport's first call, whose target names it; the
// engine's breakers join it then.
func Example() {
	// The client given in Go; this one reaches no server (the example
	// shows the binding, not the syncs).
	rdb := redis.NewClient(&redis.Options{Dialer: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no server in this example")
	}})
	defer rdb.Close()
	b, _ := circuitbreaker.New(circuitbreaker.WithName("pkg.Svc"))
	defer b.Close()

	sec := &config.ClusterSection{} // cluster: {} without a namespace
	quiet := cluster.WithLogger(slog.New(slog.DiscardHandler))
	link, err := clusterlink.Start(cluster.DefaultConfig(), sec, rdb, []cluster.Option{quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer link.Close() // before rdb.Close

	fmt.Println("cluster before the first call:", link.Cluster() != nil)
	target := "dns:///payments:443" // the first call's grpc.ClientConn.CanonicalTarget()
	if !link.Bound(target) {        // lock-free; Bind under the engine's lock
		link.Bind(target, func(cl *cluster.Cluster) { cl.Add(b) })
	}
	fmt.Println("namespace:", link.Cluster().Config().Namespace)
	fmt.Println("bound:", link.Bound(target))
	// Output:
	// cluster before the first call: false
	// namespace: meshless@dns:///payments:443
	// bound: true
}
