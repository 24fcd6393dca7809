package grpcmw

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// Chain is one client's resilience: for each method it calls, the policies
// its configuration resolves to, run in the fixed order of doc.go. Build it
// with [New] and install its interceptors on the client's connection. A
// Chain is safe for concurrent use.
type Chain struct {
	opts    options
	monitor *outlier.Monitor    // the outlier balancer's, when outlierDetection is on
	ejects  resilience.Recorder // the observer's recorder of the monitor's events
	cluster *cluster.Cluster    // when the cluster section is on; under mu
	bind    *clusterBinding     // set by New when the cluster waits for its target
	// ownRedis is the client the chain dialled for cluster.redis; nil when
	// the caller gave one (WithRedisClient).
	ownRedis redis.UniversalClient
	mu       sync.Mutex // serialises Reload and the first call of a method
	state    atomic.Pointer[state]
}

// state is one configuration's resolved policies. Reload replaces it whole.
type state struct {
	cfg         *Config
	throttle    *retry.Throttle
	throttleSet throttleSettings
	methods     *methodTable
	// breakers and bulkheads by key ("pkg.Svc" or "pkg.Svc/Method"), under
	// Chain.mu.
	breakers   map[string]*breakerEntry
	bulkheads  map[string]*bulkheadEntry
	throttlers map[string]*throttlerEntry
	limiters   map[string]*limiterEntry
}

type breakerEntry struct {
	b    *circuitbreaker.Breaker
	cfg  circuitbreaker.Config // the configuration it was built from
	rej  rejectionCache
	kept bool // carried over by Reload
}

type bulkheadEntry struct {
	b   *bulkhead.Bulkhead
	cfg bulkhead.Config
	rej rejectionCache
}

// method is one method's resolved policy set; nil fields are switched off.
type method struct {
	name    string              // "pkg.Svc/Method", for observers
	call    resilience.Recorder // the logical call's events (KindCall); nil without an observer
	overall *timeout.Timeout
	retry   *retry.Retry
	// tally moves the client's retry throttle for a method that does not
	// retry (gRFC A6 counts every RPC): a one-attempt policy with no
	// observer. Nil when the method retries or throttling is off.
	tally     *retry.Retry
	breaker   *breakerEntry
	bulkhead  *bulkheadEntry
	throttler *throttlerEntry
	limiter   *limiterEntry
	classes   classes
	retryable [17]bool
	hedge     *retry.Hedge // in retry's place when the method hedges
	nonFatal  [17]bool
	// The attempt pipelines, in the order of order.go: unary calls and
	// streams differ only in their per-attempt timeout (a stream takes only
	// the timeouts its method's own level sets).
	unary, stream *resilience.Pipeline
	streamOverall time.Duration
}

// New returns the chain for cfg (validated first; an invalid config is an
// error naming each problem's path). A nil cfg means every default.
func New(cfg *Config, opts ...Option) (*Chain, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.maxMethods < 1 {
		return nil, fmt.Errorf("grpcmw: WithMaxMethods: must be at least 1, got %d", o.maxMethods)
	}
	if o.retryBufferLimit < 0 {
		return nil, fmt.Errorf("grpcmw: WithRetryBufferLimit: must not be negative, got %d", o.retryBufferLimit)
	}
	c := &Chain{opts: o}
	st, err := c.newState(cfg, nil)
	if err != nil {
		return nil, err
	}
	c.state.Store(st)
	if _, on := st.cfg.outlierConfig(); on && !o.serverSide {
		c.ejects = resilience.Attach(o.observer, resilience.Source{Kind: resilience.KindOutlier, Name: "outlier"})
		c.monitor, err = outlier.NewMonitor(outlier.WithClock(o.clock),
			outlier.WithListener(ejectionListener{user: o.outlierListener, rec: c.ejects}))
		if err != nil {
			resilience.Release(c.ejects)
			return nil, fmt.Errorf("grpcmw: outlierDetection: %w", err)
		}
	}
	if err := c.startCluster(st.cfg); err != nil {
		if c.monitor != nil {
			c.monitor.Close()
		}
		return nil, err
	}
	return c, nil
}

func (c *Chain) newState(cfg *Config, old *state) (*state, error) {
	if cfg == nil {
		cfg = new(Config)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	th, err := throttleOf(cfg.RetryThrottling)
	if err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, throttle: th, throttleSet: resolveThrottle(cfg.RetryThrottling),
		breakers: map[string]*breakerEntry{}, bulkheads: map[string]*bulkheadEntry{},
		throttlers: map[string]*throttlerEntry{}, limiters: map[string]*limiterEntry{}}
	if old != nil {
		if old.throttle != nil && th != nil && old.throttleSet == st.throttleSet {
			st.throttle = old.throttle // unchanged settings: keep the tokens across reloads
		}
		for k, e := range old.breakers {
			st.breakers[k] = &breakerEntry{b: e.b, cfg: e.cfg, kept: true}
		}
		for k, e := range old.bulkheads {
			st.bulkheads[k] = e
		}
		for k, e := range old.throttlers {
			st.throttlers[k] = e
		}
		for k, e := range old.limiters {
			st.limiters[k] = e
		}
	}
	st.methods = newMethodTable()
	return st, nil
}

// build resolves one method's policies. Called with c.mu held.
func (c *Chain) build(st *state, svc, name string) *method {
	var sp, mp *Policies
	spath, mpath := join("services", svc), ""
	if s := st.cfg.Services[svc]; s != nil {
		sp = &s.Policies
		mp = s.Methods[name]
		mpath = join(spath+".methods", name)
	}
	svcEff := resolve(level{"defaults", &st.cfg.Defaults}, level{spath, sp})
	eff := resolve(level{"defaults", &st.cfg.Defaults}, level{spath, sp}, level{mpath, mp})
	m := &method{name: svc + "/" + name}
	o := &c.opts
	if !o.serverSide {
		m.call = resilience.Attach(o.observer, resilience.Source{Kind: resilience.KindCall, Name: m.name})
	}

	key, shared, sharedLevels := svc, svcEff, []*Policies{&st.cfg.Defaults, sp}
	if *svcEff.CircuitBreaker.KeyBy == KeyByMethod {
		key, shared, sharedLevels = svc+"/"+name, eff, append(sharedLevels, mp)
	}
	if cb := shared.CircuitBreaker; *cb.Enabled && !o.serverSide {
		m.breaker = c.breaker(st, key, cb)
	}
	m.classes = newClasses(eff.CircuitBreaker.FailureStatusCodes, eff.CircuitBreaker.IgnoredStatusCodes)
	if bh := shared.Bulkhead; *bh.Enabled {
		m.bulkhead = c.bulkhead(st, key, bh)
	}
	if at := shared.AdaptiveThrottling; *at.Enabled && !o.serverSide {
		m.throttler = c.throttler(st, key, at, m.breaker)
	}
	if rateLimiterOn(sharedLevels...) {
		m.limiter = c.limiter(st, key, shared.RateLimiter)
	}
	if o.serverSide {
		m.unary = m.pipeline(o, nil)
		m.stream = m.unary
		return m
	}
	// The method's retryableStatusCodes decide what a failure is for the
	// throttle even when the method does not retry.
	r := eff.Retry
	for _, code := range r.RetryableStatusCodes {
		if int(code) < len(m.retryable) {
			m.retryable[code] = true
		}
	}
	if hedgingOn(&st.cfg.Defaults, sp, mp) {
		m.hedge = c.newHedge(st, m, eff.Hedging)
	} else if *r.Enabled && *r.MaxAttempts > 1 {
		rc, _ := retryConfig(r) // validated with the config
		rc.Name = m.name
		ropts := []retry.Option{
			retry.WithConfig(rc),
			retry.WithRetryable(m.isRetryable),
			retry.WithClassifier(m.classes.outcome),
			retry.WithPushback(pushbackOf),
			retry.WithClock(o.clock),
			retry.WithObserver(o.observer),
		}
		if st.throttle != nil {
			ropts = append(ropts, retry.WithThrottle(st.throttle))
		}
		m.retry, _ = retry.New(ropts...)
	} else if st.throttle != nil {
		rc := retry.DefaultConfig()
		rc.MaxAttempts = 1
		m.tally, _ = retry.New(retry.WithConfig(rc), retry.WithRetryable(m.isRetryable),
			retry.WithClassifier(m.classes.outcome), retry.WithPushback(pushbackOf), retry.WithThrottle(st.throttle))
	}
	var perAttempt, streamPerAttempt *timeout.Timeout
	if t := eff.Timeout; *t.Enabled {
		if t.Overall.D() > 0 {
			m.overall, _ = timeout.New(t.Overall.D(), timeout.WithScope(timeout.Overall), timeout.WithName(m.name), timeout.WithObserver(o.observer))
		}
		perAttempt, _ = timeout.New(t.PerAttempt.D(), timeout.WithName(m.name), timeout.WithObserver(o.observer))
		if mp != nil && mp.Timeout != nil {
			if mp.Timeout.Overall != nil {
				m.streamOverall = mp.Timeout.Overall.D()
			}
			if mp.Timeout.PerAttempt != nil {
				streamPerAttempt, _ = timeout.New(mp.Timeout.PerAttempt.D(), timeout.WithName(m.name), timeout.WithObserver(o.observer))
			}
		}
	}
	m.unary = m.pipeline(o, perAttempt)
	m.stream = m.pipeline(o, streamPerAttempt)
	return m
}

func (c *Chain) breaker(st *state, key string, cb *CircuitBreakerSection) *breakerEntry {
	cfg, _ := breakerConfig(cb, key) // validated with the config
	if e, ok := st.breakers[key]; ok {
		if e.cfg == cfg {
			return e
		}
		if e.kept && e.cfg.SlidingWindowType == cfg.SlidingWindowType && e.cfg.SlidingWindowSize == cfg.SlidingWindowSize {
			// Reloaded with new thresholds and the same window: keep the
			// breaker's state and counts.
			if err := e.b.Reconfigure(circuitbreaker.WithConfig(cfg)); err == nil {
				e.cfg = cfg
				return e
			}
		}
		if c.cluster != nil {
			c.cluster.Remove(e.b)
		}
		e.b.Close() // replaced: its gauges go
	}
	b, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(c.opts.clock), circuitbreaker.WithObserver(c.opts.observer))
	if err != nil {
		return nil // cannot happen: the config was validated
	}
	if c.cluster != nil {
		c.cluster.Add(b)
	}
	e := &breakerEntry{b: b, cfg: cfg}
	st.breakers[key] = e
	return e
}

func (c *Chain) bulkhead(st *state, key string, bh *BulkheadSection) *bulkheadEntry {
	cfg, _ := bulkheadConfig(bh, key) // validated with the config
	if e, ok := st.bulkheads[key]; ok {
		if e.cfg == cfg {
			return e
		}
		e.b.Close() // replaced: its gauges go
	}
	b, err := bulkhead.New(bulkhead.WithConfig(cfg), bulkhead.WithClock(c.opts.clock), bulkhead.WithObserver(c.opts.observer))
	if err != nil {
		return nil
	}
	e := &bulkheadEntry{b: b, cfg: cfg}
	st.bulkheads[key] = e
	return e
}

// isRetryable: a retryable code, and not a rejection a downstream meshless
// made (those are never retried, at any hop).
func (m *method) isRetryable(err error) bool {
	code, ok := codeOf(err)
	if !ok || int(code) >= len(m.retryable) || !m.retryable[code] {
		return false
	}
	return RejectionReason(err) == ""
}

func pushbackOf(err error) (time.Duration, bool) {
	if pe, ok := err.(*pushbackError); ok {
		return pe.delay, true
	}
	return 0, false
}

// Reload replaces the configuration atomically: the next calls resolve
// their policies from the new one. A breaker whose window (type and size)
// did not change is kept, with its state and counts, and takes its new
// thresholds at once (calls already running report to it too); a bulkhead
// whose settings did not change is kept; retry throttling keeps its tokens
// when its settings did not change. Policies of keys the new configuration no
// longer uses stay in memory until the chain is dropped. The cluster section
// cannot change (an error: build a new chain); breakers kept stay in the
// cluster, new ones join it, replaced ones leave it. An invalid cfg is
// refused and the old one stays.
func (c *Chain) Reload(cfg *Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.state.Load()
	st, err := c.newState(cfg, old)
	if err != nil {
		return err
	}
	if !c.opts.serverSide && !sameDialConfig(old.cfg, st.cfg) {
		return fmt.Errorf("grpcmw: Reload: %w", errOutlierReload)
	}
	if !c.opts.serverSide && !sameCluster(old.cfg, st.cfg) {
		return fmt.Errorf("grpcmw: Reload: %w", errClusterReload)
	}
	c.state.Store(st)
	return nil
}

// Close releases what the chain holds beyond its calls: its cluster (and the
// Redis client it dialled for cluster.redis, not one given with
// WithRedisClient), each breaker's timer, and the observer gauges of its
// breakers and bulkheads, so that an
// Observer shared with other chains stops reporting this one. Calls still in
// flight finish; the chain must not be used after Close.
func (c *Chain) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeCluster() // first: it stops touching the breakers
	st := c.state.Load()
	for _, e := range st.breakers {
		e.b.Close()
	}
	for _, e := range st.bulkheads {
		e.b.Close()
	}
	if c.monitor != nil {
		c.monitor.Close()
		resilience.Release(c.ejects)
	}
}

// Throttle returns the client's retry throttle (retryThrottling), shared by
// all its methods, or nil when retryThrottling is off. Its Tokens tell how
// close the client is to holding retries back.
func (c *Chain) Throttle() *retry.Throttle { return c.state.Load().throttle }

// Config returns the configuration in force.
func (c *Chain) Config() *Config { return c.state.Load().cfg }

// Breaker returns the breaker of key ("pkg.Svc" or "pkg.Svc/Method"), once a
// call has created it.
func (c *Chain) Breaker(key string) (*circuitbreaker.Breaker, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.state.Load().breakers[key]
	if !ok {
		return nil, false
	}
	return e.b, true
}

// Bulkhead returns the bulkhead of key, once a call has created it.
func (c *Chain) Bulkhead(key string) (*bulkhead.Bulkhead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.state.Load().bulkheads[key]
	if !ok {
		return nil, false
	}
	return e.b, true
}
