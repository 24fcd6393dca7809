package engine

import (
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/clusterlink"
)

// startCluster builds the engine's cluster when the configuration has one
// (a client's only): started now with a namespace written, else on the
// transport's first call ([Engine.BindTarget]; see clusterlink.Start).
// Called by New.
func (e *Engine) startCluster(cfg *config.Config) error {
	ccfg, on, err := cfg.ClusterConfig()
	if err != nil || !on || e.opts.ServerSide {
		return err
	}
	opts := []cluster.Option{cluster.WithClock(e.opts.Clock)} // besides the Config
	if e.opts.ClusterListener != nil {
		opts = append(opts, cluster.WithListener(e.opts.ClusterListener))
	}
	e.cluster, err = clusterlink.Start(ccfg, cfg.Cluster, e.opts.Redis, opts)
	return err
}

// WantsTarget reports whether [Engine.BindTarget] has anything to do: the
// cluster waits for its target, or a second target has not been reported
// yet. It is at most two atomic loads.
func (e *Engine) WantsTarget() bool { return e.cluster.WantsTarget() }

// BindTarget starts the engine's cluster in the namespace of target (the
// dial target of a gRPC client: what its breakers protect), the first time,
// when the configuration leaves the namespace at its default; every breaker
// the engine has joins it. Later targets change nothing: the first
// different one is logged once. A transport calls it on a key's first call.
func (e *Engine) BindTarget(target string) {
	if e.cluster.Bound(target) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster.Bind(target, func(cl *cluster.Cluster) {
		for _, be := range e.state.Load().breakers {
			cl.Add(be.b)
		}
	})
}
