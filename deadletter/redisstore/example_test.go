package redisstore_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/redisstore"
)

// Every instance of a client opens the store in the same namespace: any of
// them replays what any other deferred. (It needs a Redis server, so it is
// compiled but not run.)
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // or cluster mode's client
	defer rdb.Close()
	store, err := redisstore.New(rdb, redisstore.WithNamespace("payments-client"))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	q, err := deadletter.New(store, deadletter.Config{Store: deadletter.StoreRedis})
	if err != nil {
		panic(err)
	}
	defer q.Close()
}
