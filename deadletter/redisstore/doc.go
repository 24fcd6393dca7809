// Package redisstore keeps dead-letter entries (package deadletter) in
// Redis Streams, through the go-redis client meshless already uses, so that
// every instance of a client shares them: any instance replays what any
// other deferred, including the entries of an instance that died.
//
// Each dead-letter key is a stream of waiting entries (XADD) read through a
// consumer group, a stream of parked entries, a hash of counters and a
// lease, all under one hash tag (one slot in Redis Cluster). One instance
// at a time replays a key — the lease, renewed at each entry, keeps a
// second reader off the stream, which would break the key's order — and it
// reads the head through the group: the entry pending in the group, which
// an instance that died was replaying (XAUTOCLAIM hands it over), else the
// next one never delivered. A replay that succeeded is acknowledged and
// deleted (XACK, XDEL) in one script that first checks the lease, so an
// entry is removed once per successful replay. Every change is one Lua
// script: bounds, lease checks and counters are atomic with it.
//
// # Durability
//
// An entry is durable when Redis says so: configure the server with
// appendonly yes and appendfsync always to survive a crash of
// redis-server (the tests do, and kill it mid-replay). With appendfsync
// everysec, up to a second of acknowledged entries can be lost; a replica
// without WAIT can lose what the primary acknowledged.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379"})
//	store, err := redisstore.New(rdb, redisstore.WithNamespace("payments-client"))
//	q, err := deadletter.New(store, cfg)
package redisstore
