package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/clusterlink"
	"github.com/meshless/meshless/internal/dlqueues"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// Options are an engine's collaborators and bounds; the transport fills
// them from its own options.
type Options struct {
	// Scope is the part of the configuration the transport reads (gRPC's
	// services, HTTP's hosts).
	Scope    config.Scope
	Observer resilience.Observer
	Clock    resilience.Clock // the system clock when nil
	// MaxKeys bounds the keys the engine keeps policies for; past it, keys
	// share their fallback entry ([Other]).
	MaxKeys int
	// Redis and ClusterListener serve the cluster section (see package
	// cluster); Redis nil dials cluster.redis.
	Redis           redis.UniversalClient
	ClusterListener cluster.Listener
	// ServerSide builds a server's policies: the bulkhead and the rate
	// limiter of each key, nothing else (no breaker, retry, throttler or
	// timeout: those protect a client from its backend).
	ServerSide bool
	// DeadLetterListener hears the dead-letter queues' events (deferred,
	// replayed, parked…: otelmw.NewDeadLetterListener records them).
	DeadLetterListener deadletter.Listener
	// RetryUncoded makes an attempt's error that carries no status code
	// (Transport.Code's false: a transport error, an attempt's timeout)
	// retryable, and non-fatal for hedging, besides the codes the
	// configuration lists: HTTP's rule (httpmw), where a refused or reset
	// connection has no status. gRPC's transport errors carry UNAVAILABLE,
	// so grpcmw leaves it off.
	RetryUncoded bool
	// TimedAttempts tells each unary attempt (each hedged copy too) that
	// is a [Timed] how long it took, from the engine's own readings of the clock
	// (grpcmw's, for the outlier balancer's slow-call detector).
	TimedAttempts bool
}

// Engine keeps one client's (or server's) policies, per key, as its
// configuration resolves them, and runs calls through them in the one
// order (see the package documentation). It is safe for concurrent use.
type Engine struct {
	t    Transport
	opts Options
	// realTime: opts.Clock is the system clock, whose readings serve for
	// context deadlines too; a custom clock's do not (see real).
	realTime bool
	// system: opts.Clock is the system clock itself (see since).
	system  bool
	timed   bool             // opts.TimedAttempts
	cluster clusterlink.Link // under mu (but WantsTarget, Bound): see startCluster
	dl      *dlqueues.Queues // made by New once the cluster has dialled its client
	mu      sync.Mutex       // serialises Reload, Close and a key's first call
	closed  bool             // under mu: Close was called
	state   atomic.Pointer[state]
}

// state is one configuration's resolved policies. Reload replaces it whole;
// the policies of keys whose settings did not change are carried over.
type state struct {
	cfg        *config.Config
	throttle   *retry.Throttle
	throttling config.RetryThrottling
	methods    *methodTable
	// The shared policies by key ("pkg.Svc" or "pkg.Svc/Method"), under
	// Engine.mu.
	breakers   map[string]*breakerEntry
	bulkheads  map[string]*bulkheadEntry
	throttlers map[string]*throttlerEntry
	limiters   map[string]*limiterEntry
}

// New returns an engine for cfg, which the transport has validated (a nil
// cfg is every default), and starts its cluster when cfg has one.
func New(cfg *config.Config, t Transport, opts Options) (*Engine, error) {
	if opts.Clock == nil {
		opts.Clock = resilience.SystemClock()
	}
	if opts.MaxKeys < 1 {
		return nil, fmt.Errorf("must be at least 1, got %d", opts.MaxKeys)
	}
	e := &Engine{t: t, opts: opts, realTime: realTime(opts.Clock), system: opts.Clock == resilience.SystemClock(),
		timed: opts.TimedAttempts}
	st, err := e.newState(cfg, nil)
	if err != nil {
		return nil, err
	}
	e.state.Store(st)
	if err := e.startCluster(st.cfg); err != nil {
		return nil, err
	}
	rdb := opts.Redis
	if rdb == nil {
		rdb = e.cluster.Redis()
	}
	e.dl = dlqueues.New(dlqueues.Options{Clock: opts.Clock, Listener: opts.DeadLetterListener, Redis: rdb, Replay: e.replay,
		MaxResume: opts.MaxKeys})
	if err := e.resumeDeadLetters(st.cfg); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) newState(cfg *config.Config, old *state) (*state, error) {
	if cfg == nil {
		cfg = new(config.Config)
	}
	st := &state{cfg: cfg, throttling: cfg.Throttling(), methods: newMethodTable(),
		breakers: map[string]*breakerEntry{}, bulkheads: map[string]*bulkheadEntry{},
		throttlers: map[string]*throttlerEntry{}, limiters: map[string]*limiterEntry{}}
	th, err := st.throttling.NewThrottle()
	if err != nil {
		return nil, err
	}
	st.throttle = th
	if old != nil {
		if old.throttle != nil && th != nil && old.throttling == st.throttling {
			st.throttle = old.throttle // unchanged settings: keep the tokens across reloads
		}
		for k, be := range old.breakers {
			st.breakers[k] = &breakerEntry{b: be.b, cfg: be.cfg, gate: be.gate, kept: true, by: be.by}
		}
		for k, be := range old.bulkheads {
			st.bulkheads[k] = be
		}
		for k, te := range old.throttlers {
			st.throttlers[k] = te
		}
		for k, le := range old.limiters {
			st.limiters[k] = le
		}
	}
	return st, nil
}

// realTime reports whether clk's readings are real time: the system clock,
// or a clock that says so (a wrapper that counts its reads, in a test).
func realTime(clk resilience.Clock) bool {
	if r, ok := clk.(interface{ RealTime() bool }); ok {
		return r.RealTime()
	}
	return clk == resilience.SystemClock()
}

// Config returns the configuration in force.
func (e *Engine) Config() *config.Config { return e.state.Load().cfg }

// Throttle returns the client's retry throttle, or nil when retryThrottling
// is off.
func (e *Engine) Throttle() *retry.Throttle { return e.state.Load().throttle }

// Cluster returns the engine's cluster, or nil without a cluster section
// (or on a server), and, when the namespace is left at its default, until
// the transport's first call ([Engine.BindTarget]).
func (e *Engine) Cluster() *cluster.Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cluster.Cluster()
}

// ErrClusterReload is Reload's error when the cluster section changed.
var ErrClusterReload = errors.New("the cluster section is read when the chain is built: build a new chain to change it")

// Reload replaces the configuration, which the transport has validated,
// atomically: the next calls resolve their policies from the new one. A
// breaker whose window (type and size) did not change is kept, with its
// state and counts, and takes its new thresholds at once; a bulkhead, rate
// limiter or throttler whose settings did not change is kept; retry
// throttling keeps its tokens when its settings did not change. The
// cluster section cannot change ([ErrClusterReload]).
func (e *Engine) Reload(cfg *config.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.state.Load()
	st, err := e.newState(cfg, old)
	if err != nil {
		return err
	}
	if !e.opts.ServerSide && !config.SameCluster(old.cfg, st.cfg) {
		return ErrClusterReload
	}
	e.dropUnused(st)
	e.reconfigureKept(st)
	e.state.Store(st)
	return nil
}

// reconfigureKept gives each breaker a reload carried over into st the
// configuration st resolves for its key, now rather than at its key's next
// call: a changed mode moves the breaker to that mode's state, and its new
// thresholds reach the calls in flight, before Reload returns (a breaker
// whose window changed is replaced now, as its key's next call would have
// done). Without it a reload to mode FORCED_OPEN left the breaker CLOSED
// until a call came, and a call waiting out a backoff retried through it.
// The method that built a breaker resolves it, as in dropUnused, which
// has removed the keys st no longer uses. Called with e.mu held.
func (e *Engine) reconfigureKept(st *state) {
	for k, be := range st.breakers {
		if s := e.resolveBy(st.cfg, be.by); s.Breaker != nil && s.Key == k {
			e.breakerOf(st, k, *s.Breaker, be.by)
		}
	}
}

// dropUnused closes the breakers and bulkheads a reload carried over into
// st whose key st's configuration no longer gives the method that built
// them (keyBy changed, the section switched off, the level removed, the
// method's host or route removed: resolveBy): nothing would build them
// again, and their gauges would report them — an open breaker OPEN on the
// dashboard, its alert firing — until Close. The method that built one
// decides for every method of its key: under keyBy: service a method may
// not switch the service's breaker or bulkhead off, nor change its key,
// and a removed route's calls go to its host's own entry, whose key is the
// host's. Calls in flight end on them. Called with e.mu held.
func (e *Engine) dropUnused(st *state) {
	for k, be := range st.breakers {
		if s := e.resolveBy(st.cfg, be.by); s.Breaker == nil || s.Key != k {
			e.cluster.Remove(be.b)
			be.b.Close()
			delete(st.breakers, k)
		}
	}
	for k, be := range st.bulkheads {
		if s := e.resolveBy(st.cfg, be.by); s.Bulkhead == nil || s.Key != k {
			be.b.Close()
			delete(st.bulkheads, k)
		}
	}
	// Rate limiters and throttlers report no gauges: they are dropped, so
	// that Limiter no longer returns them and a chain does not carry every
	// key it ever had through all its reloads.
	for k, le := range st.limiters {
		if s := e.resolveBy(st.cfg, le.by); s.RateLimiter == nil || s.Key != k {
			delete(st.limiters, k)
		}
	}
	for k, te := range st.throttlers {
		if s := e.resolveBy(st.cfg, te.by); s.Throttler == nil || s.Key != k {
			delete(st.throttlers, k)
		}
	}
}

// A Namer is a [Transport] that tells whether a configuration names a
// method, as the names a transport gives [Engine.Lookup] do: a method it
// does not name runs on its group's [Other] entry, or the defaults'.
// Without it every method is taken as named.
type Namer interface {
	Names(cfg *config.Config, group, name string) bool
}

// resolveBy resolves in cfg the settings the next call of the method that
// built a policy takes: its own, while cfg names it, else, as Lookup sends
// a method cfg does not name, its group's Other entry's, or the defaults'
// when cfg no longer names its group (a host removed from the YAML: its
// requests go to the unknown hosts' entry, and its key is no one's).
func (e *Engine) resolveBy(cfg *config.Config, by method) config.Method {
	group, name := by.group, by.name
	if n, ok := e.t.(Namer); ok && name != Other && !n.Names(cfg, group, name) {
		name = Other
	}
	if name == Other && group != Other && !cfg.HasGroup(e.opts.Scope, group) {
		group = Other
	}
	return cfg.Resolve(e.opts.Scope, group, name)
}

// Close releases what the engine holds beyond its calls: its cluster (and
// the Redis client it dialled), each breaker's timer, and the observer
// gauges of its breakers and bulkheads. Calls in flight finish; a key's
// first call after Close gets a breaker and a bulkhead without gauges
// (see gauged).
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	closeDeadLetters := e.dl.Detach()
	e.cluster.Close()
	st := e.state.Load()
	for _, be := range st.breakers {
		be.b.Close()
	}
	for _, be := range st.bulkheads {
		be.b.Close()
	}
	e.mu.Unlock()
	closeDeadLetters() // without the lock: a replay in flight may need it
	if rdb := e.cluster.Redis(); rdb != nil {
		// Last: a Redis dead-letter store without a redis section of its
		// own uses this client, and its queues give their leases back
		// while they close.
		_ = rdb.Close()
	}
}

// Breaker returns the breaker of key, once a call has created it.
func (e *Engine) Breaker(key string) (*circuitbreaker.Breaker, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	be, ok := e.state.Load().breakers[key]
	if !ok {
		return nil, false
	}
	return be.b, true
}

// Bulkhead returns the bulkhead of key, once a call has created it.
func (e *Engine) Bulkhead(key string) (*bulkhead.Bulkhead, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	be, ok := e.state.Load().bulkheads[key]
	if !ok {
		return nil, false
	}
	return be.b, true
}

// Limiter returns the rate limiter of key, once a call has created it.
func (e *Engine) Limiter(key string) (*ratelimiter.Limiter, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	le, ok := e.state.Load().limiters[key]
	if !ok {
		return nil, false
	}
	return le.l, true
}

// Keys returns how many entries the method table holds.
func (e *Engine) Keys() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state.Load().methods.n
}

// Lookup returns the policy set of key (a gRPC full method name). After
// its first call it takes no lock and allocates nothing. On a key's first
// call, names tells the settings it resolves to: its group and name in the
// configuration (service and method), and whether the key is known (named
// by the configuration, or vouched for by the transport). A key that is not
// known, or past the bound, gets its group's [Other] entry when the
// configuration names its group, else the defaults' ("_OTHER/_OTHER").
func (e *Engine) Lookup(key string, names func(cfg *config.Config) (group, name string, known bool)) *Method {
	st := e.state.Load()
	if m, ok := st.methods.load(key); ok {
		return m
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st = e.state.Load()
	if m, ok := st.methods.loadLocked(key); ok {
		return m
	}
	group, name, known := names(st.cfg)
	if known && st.methods.n < e.opts.MaxKeys {
		m := e.build(st, group, name)
		st.methods.storeLocked(key, m)
		return m
	}
	// Unknown, malformed, or past the bound: the fallback entry, made once.
	if !st.cfg.HasGroup(e.opts.Scope, group) {
		group = Other
	}
	fallback := "/" + group + "/" + Other
	if m, ok := st.methods.loadLocked(fallback); ok {
		return m
	}
	m := e.build(st, group, Other)
	st.methods.storeLocked(fallback, m) // at most one per configured group, and one more
	return m
}
