package cluster_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// Two instances of one client share a breaker through Redis. (It needs a
// Redis at 127.0.0.1:6379, so it is compiled but not run.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	cb, _ := circuitbreaker.New(circuitbreaker.WithName("payment.PaymentService"))
	cfg := cluster.DefaultConfig()
	cfg.Namespace = "payments-client" // one per client: instances of it share its breakers
	c, err := cluster.New(rdb, cluster.WithConfig(cfg))
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Add(cb)
	c.Start()
	defer c.Close()

	// Calls use the breaker as ever; the cluster syncs in the background.
	_ = cb.Execute(context.Background(), func(context.Context) error { return nil })
}

// A configuration mistake names its key.
func ExampleNew_invalid() {
	cfg := cluster.DefaultConfig()
	cfg.SyncInterval = 0
	_, err := cluster.New(nil, cluster.WithConfig(cfg))
	fmt.Println(err)
	// Output: cluster: syncInterval: must be in [10ms, 1h0m0s], got 0s
}

// Redact hides the password of a Redis URL in a message.
func ExampleRedact() {
	fmt.Println(cluster.Redact("cannot reach rediss://app:hunter2@redis.internal:6380/0"))
	// Output: cannot reach rediss://app:xxxxx@redis.internal:6380/0
}
