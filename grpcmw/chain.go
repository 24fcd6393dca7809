package grpcmw

import (
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// Chain is one client's resilience: for each method it calls, the policies
// its configuration resolves to, run in the fixed order of doc.go. Build it
// with [New] and install its interceptors on the client's connection. A
// Chain is safe for concurrent use.
//
// Close a Chain when done with it ([Chain.Close]; a reload that builds a
// new chain closes the old one once its connection is closed): a chain
// that is dropped unclosed keeps its cluster's goroutines and Redis
// connections, its dead-letter queues' goroutines and store, and its
// outlier monitor, one of outlier.MaxMonitors, for the life of the
// process; past that many, New fails.
type Chain struct {
	opts    options
	t       *transport
	e       *engine.Engine
	monitor *outlier.Monitor    // the outlier balancer's, when outlierDetection is on
	ejects  resilience.Recorder // the observer's recorder of the monitor's events
	timed   bool                // the balancer times calls: unary attempts carry a note
}

// OtherMethod is the method name under which a chain keeps the policies of
// every method it does not know: one the configuration does not name and no
// service descriptor linked into the program declares (a name a remote
// client invented, or one a program built at run time), and every method
// past the chain's bound ([WithMaxMethods]). Such a call runs with the
// policies of its service's entry when the configuration names its service
// ("pkg.Svc/_OTHER"), else with the defaults' ("_OTHER/_OTHER"); it never
// creates state of its own, and never runs without policies.
const OtherMethod = engine.Other

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
	if cfg == nil {
		cfg = new(Config)
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	t := new(transport)
	ocfg, outliers := outlierConfig(cfg)
	outliers = outliers && !o.serverSide
	// A balancer that times calls takes each attempt's time from the engine
	// (package picknote): the attempt's context carries a note for its pick.
	timed := outliers && !ocfg.SlowCalls.Disabled
	e, err := engine.New(cfg, t, engine.Options{Observer: o.observer, Clock: o.clock, MaxKeys: o.maxMethods,
		Redis: o.redis, ClusterListener: o.clusterListener, ServerSide: o.serverSide, DeadLetterListener: o.deadLetterListener,
		TimedAttempts: timed})
	if err != nil {
		return nil, fmt.Errorf("grpcmw: %w", err)
	}
	c := &Chain{opts: o, t: t, e: e, timed: timed}
	if outliers {
		c.ejects = resilience.Attach(o.observer, resilience.Source{Kind: resilience.KindOutlier, Name: "outlier"})
		c.monitor, err = outlier.NewMonitor(outlier.WithClock(o.clock),
			outlier.WithListener(ejectionListener{user: o.outlierListener, rec: c.ejects}))
		if err != nil {
			resilience.Release(c.ejects)
			e.Close()
			return nil, fmt.Errorf("grpcmw: outlierDetection: %w", err)
		}
	}
	return c, nil
}

// Names reports whether cfg names method name of svc, as a call's lookup
// reads it (engine.Namer): known.
func (*transport) Names(cfg *Config, svc, name string) bool { return known(cfg, svc, name) }

// NamesGroup reports whether the program links a service descriptor of
// svc with methods (dlqueues.GroupNamer): its calls are known although the
// configuration does not write it.
func (*transport) NamesGroup(svc string) bool {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	return ok && sd.Methods().Len() > 0
}

// known reports whether the method svc/name is a real one: named by the
// configuration, or declared by a service descriptor linked into the
// program (the generated code of every service a program serves or calls
// registers one).
func known(cfg *Config, svc, name string) bool {
	if s := cfg.Services[svc]; s != nil {
		if _, ok := s.Methods[name]; ok {
			return true
		}
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	return ok && sd.Methods().ByName(protoreflect.Name(name)) != nil
}

// splitMethod splits "/pkg.Svc/Method".
func splitMethod(full string) (svc, name string, ok bool) {
	rest, found := strings.CutPrefix(full, "/")
	if !found {
		return "", "", false
	}
	svc, name, ok = strings.Cut(rest, "/")
	return svc, name, ok && svc != "" && name != "" && !strings.Contains(name, "/")
}

// Reload replaces the configuration atomically: the next calls resolve
// their policies from the new one. A breaker whose window (type and size)
// did not change is kept, with its state and counts, and takes its new
// thresholds at once (calls already running report to it too); a bulkhead
// whose settings did not change is kept; retry throttling keeps its tokens
// when its settings did not change. A breaker or bulkhead whose key the new
// configuration no longer uses (keyBy changed, the section switched off) is
// closed: its gauges go, and calls still running end on it. The cluster section
// cannot change (an error: build a new chain); breakers kept stay in the
// cluster, new ones join it, replaced ones leave it. An invalid cfg is
// refused and the old one stays.
func (c *Chain) Reload(cfg *Config) error {
	if cfg == nil {
		cfg = new(Config)
	}
	if err := validate(cfg); err != nil {
		return err
	}
	if !c.opts.serverSide && !sameDialConfig(c.e.Config(), cfg) {
		return fmt.Errorf("grpcmw: Reload: %w", errOutlierReload)
	}
	if err := c.e.Reload(cfg); err != nil {
		return fmt.Errorf("grpcmw: Reload: %w", err)
	}
	return nil
}

// Close releases what the chain holds beyond its calls: its cluster (and the
// Redis client it dialled for cluster.redis, not one given with
// WithRedisClient), each breaker's timer, and the observer gauges of its
// breakers and bulkheads, so that an
// Observer shared with other chains stops reporting this one. Calls still in
// flight finish; the chain must not be used after Close. A call that still
// goes through its interceptors (a connection not closed yet) runs, but a
// method first called then reports to no observer's gauges: nothing would
// release them.
func (c *Chain) Close() {
	c.e.Close()
	if c.monitor != nil {
		c.monitor.Close()
		resilience.Release(c.ejects)
	}
}

// Throttle returns the client's retry throttle (retryThrottling), shared by
// all its methods, or nil when retryThrottling is off. Its Tokens tell how
// close the client is to holding retries back.
func (c *Chain) Throttle() *retry.Throttle { return c.e.Throttle() }

// Config returns the configuration in force.
func (c *Chain) Config() *Config { return c.e.Config() }

// Breaker returns the breaker of key ("pkg.Svc" or "pkg.Svc/Method"), once a
// call has created it.
func (c *Chain) Breaker(key string) (*circuitbreaker.Breaker, bool) { return c.e.Breaker(key) }

// Bulkhead returns the bulkhead of key, once a call has created it.
func (c *Chain) Bulkhead(key string) (*bulkhead.Bulkhead, bool) { return c.e.Bulkhead(key) }

// Limiter returns the rate limiter of key ("pkg.Svc" or "pkg.Svc/Method"),
// once a call has created it.
func (c *Chain) Limiter(key string) (*ratelimiter.Limiter, bool) { return c.e.Limiter(key) }

// DialOptions returns the dial options that install the chain's
// interceptors and, when the configuration has outlierDetection or
// healthCheck, the default service config that installs the meshless_outlier
// balancer and gRPC's client-side health checking (docs/outlier.md). A
// service config from the resolver (DNS TXT, xDS) overrides the default one
// unless the connection also has grpc.WithDisableServiceConfig.
func (c *Chain) DialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor()),
	}
	sc, _ := c.dialServiceConfig() // validated with the config
	return append(opts, sc...)
}

// Cluster returns the chain's cluster, or nil when its configuration has no
// cluster section (or a Server's chain).
func (c *Chain) Cluster() *cluster.Cluster { return c.e.Cluster() }
