package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
)

// startCluster builds the engine's cluster when the configuration has one
// (a client's only). With a namespace written, it starts now: every client
// naming that namespace shares breakers by name. Left at its default, the
// namespace is derived from the target of the transport's first call
// ([Engine.BindTarget]), and the cluster starts then. Called by New.
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
	opts := []cluster.Option{cluster.WithClock(e.opts.Clock)} // besides the Config
	if e.opts.ClusterListener != nil {
		opts = append(opts, cluster.WithListener(e.opts.ClusterListener))
	}
	cl, err := cluster.New(rdb, append(opts, cluster.WithConfig(ccfg))...) // validates the settings now, whatever the namespace
	if err != nil {
		if e.ownRedis != nil {
			_ = e.ownRedis.Close()
		}
		return fmt.Errorf("cluster: %w", err)
	}
	if cfg.Cluster.Namespace == nil {
		cl.Close() // never started: it holds nothing
		e.bind = &clusterBinding{rdb: rdb, opts: opts, cfg: ccfg}
		return nil
	}
	e.cluster = cl
	cl.Start()
	return nil
}

// clusterBinding is the cluster of an engine whose namespace comes from its
// target: made and started on the transport's first call.
type clusterBinding struct {
	rdb  redis.UniversalClient
	opts []cluster.Option // all but the Config
	cfg  cluster.Config

	bound  atomic.Bool // target is set
	target string      // the first call's target, written once before bound
	warned atomic.Bool // a call to another target was logged
	closed bool        // under Engine.mu: the engine is closed
}

// WantsTarget reports whether [Engine.BindTarget] has anything to do: the
// cluster waits for its target, or a second target has not been reported
// yet. It is at most two atomic loads.
func (e *Engine) WantsTarget() bool {
	return e.bind != nil && (!e.bind.bound.Load() || !e.bind.warned.Load())
}

// BindTarget starts the engine's cluster in the namespace of target (the
// dial target of a gRPC client: what its breakers protect), the first time,
// when the configuration leaves the namespace at its default; every breaker
// the engine has joins it. Later targets change nothing: the first
// different one is logged once. A transport calls it on a key's first call.
func (e *Engine) BindTarget(target string) {
	b := e.bind
	if b == nil {
		return
	}
	if b.bound.Load() {
		if target != b.target && b.warned.CompareAndSwap(false, true) {
			slog.Warn("meshless: one chain calls two targets; its breakers are shared in Redis under the first target's namespace only",
				"namespace", targetNamespace(b.cfg.Namespace, b.target), "first", cluster.Redact(b.target), "other", cluster.Redact(target))
		}
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b.bound.Load() || b.closed {
		return
	}
	b.target = target
	b.bound.Store(true)
	cfg := b.cfg
	cfg.Namespace = targetNamespace(b.cfg.Namespace, target)
	cl, err := cluster.New(b.rdb, append(b.opts[:len(b.opts):len(b.opts)], cluster.WithConfig(cfg))...)
	if err != nil { // cannot happen: the settings were validated by New, the namespace is valid by construction
		slog.Error("meshless: cluster mode is off for this chain", "error", err)
		return
	}
	for _, be := range e.state.Load().breakers {
		cl.Add(be.b)
	}
	e.cluster = cl
	cl.Start()
}

// closeCluster closes the engine's cluster; Close closes the Redis client
// it dialled once the dead-letter queues are closed too. Called with e.mu
// held.
func (e *Engine) closeCluster() {
	if e.bind != nil {
		e.bind.closed = true
	}
	if e.cluster != nil {
		e.cluster.Close() // first: it stops touching the breakers
	}
}

// maxScope bounds the target's part of a derived namespace.
const maxScope = 64

// targetNamespace is the namespace of an engine whose namespace is left at
// its default prefix: prefix@target. A target longer than maxScope bytes,
// or with a byte other than a letter, a digit or one of ._-:/[], is kept
// readable up to 40 bytes (without user information, unsafe bytes as _)
// and made unique by 16 hex digits of its SHA-256: at most 66 bytes with
// the default prefix.
func targetNamespace(prefix, target string) string {
	if len(target) <= maxScope && strings.IndexFunc(target, unsafeInKey) < 0 {
		return prefix + "@" + target
	}
	readable := target
	if scheme, rest, ok := strings.Cut(readable, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		readable = scheme + "://" + rest
	} else if at := strings.LastIndex(readable, "@"); at >= 0 {
		readable = readable[at+1:]
	}
	readable = strings.Map(func(r rune) rune {
		if unsafeInKey(r) {
			return '_'
		}
		return r
	}, readable)
	if len(readable) > 40 {
		readable = readable[:40]
	}
	sum := sha256.Sum256([]byte(target))
	return prefix + "@" + readable + "~" + hex.EncodeToString(sum[:8])
}

func unsafeInKey(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("._-:/[]", r)
}
