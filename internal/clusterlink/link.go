package clusterlink

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/clusterkey"
)

// Link is an engine's cluster; its zero value is no cluster (no cluster
// section, or a server).
type Link struct {
	cl   *cluster.Cluster // the cluster, once started
	bind *binding         // set by Start when the cluster waits for its target
	own  redis.UniversalClient
}

// Start builds the cluster of ccfg, the cluster section sec resolves to
// (config.Config.ClusterConfig). With a namespace written, it starts now:
// every client naming that namespace shares breakers by name. Left at its
// default, the namespace is derived from the target of the transport's
// first call ([Link.Bind]), and the cluster starts then. rdb nil dials
// sec's redis; opts are the cluster's options but its Config.
func Start(ccfg cluster.Config, sec *config.ClusterSection, rdb redis.UniversalClient, opts []cluster.Option) (Link, error) {
	var l Link
	if rdb == nil {
		ro, err := sec.Redis.Options()
		if err != nil {
			return l, err
		}
		if ro == nil {
			return l, &config.PathError{Path: "cluster.redis", Problem: "needs addr or url (or a client given in Go)"}
		}
		// Each exchange is bounded by the cluster's timeout: the client gives
		// up then too, instead of waiting for its default 3 s read timeout.
		t := ccfg.Timeout
		if t <= 0 {
			t = min(ccfg.SyncInterval/2, time.Second)
		}
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = t, t, t
		ro.ContextTimeoutEnabled = true
		l.own = redis.NewClient(ro)
		rdb = l.own
	}
	cl, err := cluster.New(rdb, append(opts, cluster.WithConfig(ccfg))...) // validates the settings now, whatever the namespace
	if err != nil {
		if l.own != nil {
			_ = l.own.Close()
		}
		return l, fmt.Errorf("cluster: %w", err)
	}
	if sec.Namespace == nil {
		cl.Close() // never started: it holds nothing
		l.bind = &binding{rdb: rdb, opts: opts, cfg: ccfg}
		return l, nil
	}
	l.cl = cl
	cl.Start()
	return l, nil
}

// Cluster returns the cluster, nil when there is none or it waits for its
// target.
func (l *Link) Cluster() *cluster.Cluster { return l.cl }

// Redis returns the client Start dialled (the cluster section's redis),
// nil when it dialled none. The engine closes it last: a Redis dead-letter
// store without a redis section of its own uses it too.
func (l *Link) Redis() redis.UniversalClient { return l.own }

// Add makes b share its state through the cluster, if there is one.
func (l *Link) Add(b *circuitbreaker.Breaker) {
	if l.cl != nil {
		l.cl.Add(b)
	}
}

// Remove stops b sharing its state, if there is a cluster.
func (l *Link) Remove(b *circuitbreaker.Breaker) {
	if l.cl != nil {
		l.cl.Remove(b)
	}
}

// Close closes the cluster (not the client Start dialled: see Redis).
func (l *Link) Close() {
	if l.bind != nil {
		l.bind.closed = true
	}
	if l.cl != nil {
		l.cl.Close() // first: it stops touching the breakers
	}
}

// binding is the cluster of an engine whose namespace comes from its
// target: made and started on the transport's first call.
type binding struct {
	rdb  redis.UniversalClient
	opts []cluster.Option // all but the Config
	cfg  cluster.Config

	bound  atomic.Bool // target is set
	target string      // the first call's target, written once before bound
	warned atomic.Bool // a call to another target was logged
	closed bool        // under the engine's lock: the engine is closed
}

// WantsTarget reports whether [Link.Bound] and [Link.Bind] have anything
// to do: the cluster waits for its target, or a second target has not been
// reported yet. It is at most two atomic loads.
func (l *Link) WantsTarget() bool {
	return l.bind != nil && (!l.bind.bound.Load() || !l.bind.warned.Load())
}

// Bound reports whether the cluster needs no [Link.Bind] for target: there
// is no binding, or its target is set; the first target other than that
// one is logged, once. It takes no lock.
func (l *Link) Bound(target string) bool {
	b := l.bind
	if b == nil {
		return true
	}
	if b.bound.Load() {
		if target != b.target && b.warned.CompareAndSwap(false, true) {
			slog.Warn("meshless: one chain calls two targets; its breakers are shared in Redis under the first target's namespace only",
				"namespace", targetNamespace(b.cfg.Namespace, b.target), "first", cluster.Redact(b.target), "other", cluster.Redact(target))
		}
		return true
	}
	return false
}

// Bind starts the cluster in the namespace of target (the dial target of a
// gRPC client: what its breakers protect), the first time, after join has
// added the breakers the engine has. Later targets change nothing (see
// Bound). Called with the engine's lock held.
func (l *Link) Bind(target string, join func(*cluster.Cluster)) {
	b := l.bind
	if b == nil || b.bound.Load() || b.closed {
		return
	}
	b.target = target
	b.bound.Store(true)
	cfg := b.cfg
	cfg.Namespace = targetNamespace(b.cfg.Namespace, target)
	cl, err := cluster.New(b.rdb, append(b.opts[:len(b.opts):len(b.opts)], cluster.WithConfig(cfg))...)
	if err != nil { // cannot happen: the settings were validated by Start, the namespace is valid by construction
		slog.Error("meshless: cluster mode is off for this chain", "error", err)
		return
	}
	join(cl)
	l.cl = cl
	cl.Start()
}

// maxScope bounds the target's part of a derived namespace.
const maxScope = 64

// targetNamespace is the namespace of an engine whose namespace is left at
// its default prefix: prefix@target. A target longer than maxScope bytes,
// or with a byte other than a letter, a digit or one of ._-:/[], is kept
// readable up to 40 bytes (without user information, unsafe bytes as _)
// and made unique by 16 hex digits of its SHA-256: at most 66 bytes with
// the default prefix. A target that would make a namespace another could
// cut its keys from (clusterkey.Problem: "unix:w", "dns:///a:probes:443")
// is hashed too, its readable part without colons: else the namespace was
// refused, and the chain's cluster mode was off.
func targetNamespace(prefix, target string) string {
	if len(target) <= maxScope && strings.IndexFunc(target, unsafeInKey) < 0 && clusterkey.Problem(prefix+"@"+target) == "" {
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
	if clusterkey.Problem(prefix+"@"+readable+"~") != "" {
		readable = strings.ReplaceAll(readable, ":", "_")
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
