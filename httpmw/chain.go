package httpmw

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// Chain is one HTTP client's resilience: for each host and route it calls,
// the policies its configuration resolves to, run in the fixed order of the
// package documentation. Build it with [New] and wrap the client's
// transport with [Chain.RoundTripper]. A Chain is safe for concurrent use.
type Chain struct {
	opts   options
	e      *engine.Engine
	router atomic.Pointer[router]
	// reload serialises Reload, so that the router stored last is the one
	// of the configuration the engine holds.
	reload sync.Mutex
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
	if o.maxRoutes < 1 {
		return nil, fmt.Errorf("httpmw: WithMaxRoutes: must be at least 1, got %d", o.maxRoutes)
	}
	if o.clock == nil {
		// The engine would take the system clock, but the chain reads
		// Retry-After's dates on its own: refused, as every policy does.
		return nil, errors.New("httpmw: WithClock: must not be nil")
	}
	if cfg == nil {
		cfg = new(Config)
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	e, err := engine.New(cfg, transport{}, engine.Options{Scope: config.HTTP, Observer: httpObserver(o.observer),
		Clock: o.clock, MaxKeys: o.maxRoutes, Redis: o.redis, ClusterListener: o.clusterListener,
		ServerSide: o.serverSide, RetryUncoded: true})
	if err != nil {
		return nil, fmt.Errorf("httpmw: %w", err)
	}
	c := &Chain{opts: o, e: e}
	c.router.Store(newRouter(cfg))
	return c, nil
}

// CallScope is the Scope of the resilience.Source of an HTTP chain's
// logical calls (resilience.KindCall): its observer tells them from
// gRPC's by it. The source's Name is "host/route" ("_OTHER" for what the
// configuration does not name), and the context of each call's event tells
// its HTTP method and response status (otelmw reads them).
const CallScope = "http"

// httpObserver marks the chain's call sources as HTTP's for obs.
func httpObserver(obs resilience.Observer) resilience.Observer {
	if obs == nil {
		return nil
	}
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind == resilience.KindCall {
			src.Scope = CallScope
		}
		return obs.Attach(src)
	})
}

// RoundTripper returns next wrapped in the chain: each request runs through
// its route's policies, and each attempt through next. A nil next is
// http.DefaultTransport.
//
//	client := &http.Client{Transport: chain.RoundTripper(http.DefaultTransport)}
//
// It keeps the http.RoundTripper contract: the caller's request is never
// modified (each attempt sends a shallow copy with its own context and,
// after the first, its own body from Request.GetBody), and its body is
// closed once, by the transport that sent it or by the chain when no
// attempt did.
//
// It returns the response of the attempt whose answer the call returns,
// whatever its status: a 4xx or a 5xx is a response, never an error. The
// body is read under the request's own context, not under the chain's
// timeouts (they bound the wait for the response's header); close it, as
// always. The error is a transport error, a timeout (a net.Error whose
// Timeout is true; errors.Is with context.DeadlineExceeded), or a local
// rejection, with no response: errors.Is with the policy's sentinel
// (circuitbreaker.ErrOpen, bulkhead.ErrFull, ratelimiter.ErrLimited,
// throttler.ErrThrottled) and [RejectionReason] naming it.
func (c *Chain) RoundTripper(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &roundTripper{c: c, next: next}
}

// Client returns an *http.Client whose transport is next wrapped in the
// chain ([Chain.RoundTripper]), and no other setting: no Timeout (the
// chain's timeouts bound each request), the default redirect policy and no
// cookie jar.
func (c *Chain) Client(next http.RoundTripper) *http.Client {
	return &http.Client{Transport: c.RoundTripper(next)}
}

// Reload replaces the configuration atomically: the next requests resolve
// their policies from the new one, as grpcmw's Chain.Reload does (a
// breaker whose window did not change keeps its state and counts; the
// cluster section cannot change). An invalid cfg is refused and the old one
// stays.
func (c *Chain) Reload(cfg *Config) error {
	if cfg == nil {
		cfg = new(Config)
	}
	if err := validate(cfg); err != nil {
		return err
	}
	r := newRouter(cfg)
	c.reload.Lock()
	defer c.reload.Unlock()
	if err := c.e.Reload(cfg); err != nil {
		return fmt.Errorf("httpmw: Reload: %w", err)
	}
	c.router.Store(r)
	return nil
}

// Close releases what the chain holds beyond its requests: its cluster (and
// the Redis client it dialled), each breaker's timer, and the observer
// gauges of its breakers and bulkheads. Requests in flight finish; the
// chain must not be used after Close.
func (c *Chain) Close() { c.e.Close() }

// Config returns the configuration in force.
func (c *Chain) Config() *Config { return c.e.Config() }

// Throttle returns the client's retry throttle (retryThrottling), or nil
// when it is off.
func (c *Chain) Throttle() *retry.Throttle { return c.e.Throttle() }

// Breaker returns the breaker of key (a host, or "host/route" with keyBy:
// method; "_OTHER" for unknown hosts), once a request has created it.
func (c *Chain) Breaker(key string) (*circuitbreaker.Breaker, bool) { return c.e.Breaker(key) }

// Bulkhead returns the bulkhead of key, once a request has created it.
func (c *Chain) Bulkhead(key string) (*bulkhead.Bulkhead, bool) { return c.e.Bulkhead(key) }

// Limiter returns the rate limiter of key, once a request has created it.
func (c *Chain) Limiter(key string) (*ratelimiter.Limiter, bool) { return c.e.Limiter(key) }

// Cluster returns the chain's cluster, or nil when its configuration has no
// cluster section (or a Server's chain).
func (c *Chain) Cluster() *cluster.Cluster { return c.e.Cluster() }
