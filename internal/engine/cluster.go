package engine

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
)

// startCluster builds and starts the engine's cluster when the
// configuration has one (a client's only). Called by New.
func (e *Engine) startCluster(cfg *config.Config) error {
	ccfg, on, err := cfg.ClusterConfig()
	if err != nil || !on || e.opts.ServerSide {
		return err
	}
	rdb := e.opts.Redis
	if rdb == nil {
		ro, err := cfg.Cluster.Redis.Options()
		if err != nil {
			return err
		}
		if ro == nil {
			return &config.PathError{Path: "cluster.redis", Problem: "needs addr or url (or a client given in Go)"}
		}
		// Each exchange is bounded by the cluster's timeout: the client gives
		// up then too, instead of waiting for its default 3 s read timeout.
		t := ccfg.Timeout
		if t <= 0 {
			t = min(ccfg.SyncInterval/2, time.Second)
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = t, t, t
		ro.ContextTimeoutEnabled = true
		e.ownRedis = redis.NewClient(ro)
		rdb = e.ownRedis
	}
	opts := []cluster.Option{cluster.WithConfig(ccfg), cluster.WithClock(e.opts.Clock)}
	if e.opts.ClusterListener != nil {
		opts = append(opts, cluster.WithListener(e.opts.ClusterListener))
	}
	cl, err := cluster.New(rdb, opts...)
	if err != nil {
		if e.ownRedis != nil {
			_ = e.ownRedis.Close()
		}
		return fmt.Errorf("cluster: %w", err)
	}
	e.cluster = cl
	cl.Start()
	return nil
}
