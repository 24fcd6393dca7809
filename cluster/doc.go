// Package cluster shares circuit breakers' decisions between the instances
// of one client through Redis (go-redis), with nothing on the per-call
// path.
//
// Every instance keeps deciding on every call with its own breakers, as
// without cluster mode. In the background, each sync interval, a [Cluster]
// publishes each closed breaker's window (calls, failures, slow calls, and
// when) if it moved since it was last written, re-stamps an unchanged one
// every second sync (so that it never looks stale to the others), and reads
// the other instances'; with [DecideCluster] or
// [DecideEither] a breaker opens when the cluster's counts cross its
// thresholds with its minimum number of calls, so a service failing at low
// traffic per pod opens although no pod could decide alone. A breaker that
// opens publishes it on a channel, and the others open the same key at
// once with the same remaining wait. Half-open probes are leased in Redis,
// so that only permittedNumberOfCallsInHalfOpenState probes run across the
// cluster; the first instance whose probes succeed closes the key
// everywhere.
//
// When Redis is slow or away every instance decides locally at once (the
// failed exchange is bounded by a timeout), logs it once (a flapping Redis
// at most once a minute), and reports it to its [Listener]; no call ever waits on Redis and no Redis error ever
// reaches a caller. Sharing resumes by itself when Redis answers again.
// Every key carries a TTL, so a dead instance's counts vanish.
//
// Anything in the namespace may have been written by another program: a
// key of the wrong type or holding garbage is repaired in the sync that
// finds it (the rest of the sync goes on; Redis is down only when it does
// not answer or refuses service), windows dated more than one sync interval
// ahead are ignored and deleted, another instance's counts weigh at most
// one full window, and an open adopted from another instance ends no later
// than the breaker's own longest open wait. Errors and logs never show the
// password of a Redis URL ([Redact]).
//
// docs/cluster.md describes the protocol (keys, messages, when each is
// written), the guarantees (eventual, within one sync interval) and the
// sizing.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	cfg := cluster.DefaultConfig()
//	cfg.Namespace = "payments-client"
//	c, err := cluster.New(rdb, cluster.WithConfig(cfg))
//	if err != nil { … }
//	c.Add(breaker) // every breaker to share, by its name
//	c.Start()
//	defer rdb.Close()
//	defer c.Close()
//
// grpcmw builds a Cluster from the cluster section of its YAML
// configuration. Any go-redis client works ([redis.UniversalClient]): a
// single server, Redis Cluster, Sentinel, or an in-process server such as
// github.com/alicebob/miniredis/v2 for demos.
package cluster
