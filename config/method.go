package config

import (
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
)

// Method is one method's settings, resolved level by level (built-in
// defaults → defaults → service → method, field by field) and mapped onto
// each policy's typed Config: what a transport's engine builds a method's
// policies from. A nil Config is a policy that is off.
type Method struct {
	// Service and Name are the method's service and short name, as the
	// configuration writes them ("payment.PaymentService", "Charge"); for
	// HTTP, the host and the route's pattern ("api.weather.example",
	// "GET /v1/current/{city}").
	Service, Name string
	// Key names the policies the method shares with the other methods of
	// its key: the service ("pkg.Svc") with circuitBreaker.keyBy: service,
	// the method ("pkg.Svc/Method") with keyBy: method; for HTTP, the host
	// or "host/route". The breaker, bulkhead, adaptive throttler and rate
	// limiter are kept by key.
	Key string

	Breaker     *circuitbreaker.Config
	Bulkhead    *bulkhead.Config
	Throttler   *throttler.Config
	RateLimiter *ratelimiter.Config
	// FailureCodes and IgnoredCodes classify the method's attempts for the
	// breaker (the method's own level may set them under keyBy: service).
	FailureCodes, IgnoredCodes Codes

	// Retry is nil when the method makes one attempt (retry off, or
	// maxAttempts 1) or hedges. RetryableCodes are also what a failure is
	// for the retry throttle when the method does not retry.
	Retry          *retry.Config
	RetryableCodes Codes
	// Hedge is set when the method hedges, in retry's place.
	Hedge         *retry.HedgeConfig
	NonFatalCodes Codes

	// PerAttempt and Overall are the method's timeouts (0: none).
	PerAttempt, Overall time.Duration
	// StreamPerAttempt and StreamOverall are a stream's: only what the
	// method's own level writes (a stream often lives far longer than a
	// unary call).
	StreamPerAttempt, StreamOverall time.Duration

	// Observe is mode: observe — every policy decides and reports, none
	// acts.
	Observe bool

	// DeadLetter is the key's dead-letter queue, nil when it has none; its
	// Config.On is the method's own (which rejections defer its calls).
	DeadLetter *DeadLetter
}

// Scope is the part of a configuration one transport reads: gRPC's
// services and methods, or HTTP's hosts and routes. The defaults serve
// both.
type Scope uint8

const (
	// GRPC is the services section: a group is a full service name, a name a
	// method's.
	GRPC Scope = iota
	// HTTP is the hosts section: a group is a host[:port], a name a route's
	// net/http pattern.
	HTTP
)

// Resolve resolves the settings of name in group for scope:
// [Config.Method] for gRPC (a service and a method), [Config.Route] for
// HTTP (a host and a route).
func (c *Config) Resolve(scope Scope, group, name string) Method {
	if scope == HTTP {
		return c.Route(group, name)
	}
	return c.Method(group, name)
}

// HasGroup reports whether the configuration writes group (a service, a
// host) in scope. An entry a Config built in Go leaves nil is written, as
// YAML's "api.example:" (null) is: the group has its own entries.
func (c *Config) HasGroup(scope Scope, group string) bool {
	var ok bool
	if scope == HTTP {
		_, ok = c.Hosts[group]
	} else {
		_, ok = c.Services[group]
	}
	return ok
}

// Method resolves the settings of method name of service svc, which need not
// be named by the configuration (the defaults, or its service's settings,
// apply). The configuration must be valid ([Config.Validate]).
func (c *Config) Method(svc, name string) Method {
	var sp, mp *Policies
	spath, mpath := Join("services", svc), ""
	if s := c.Services[svc]; s != nil {
		sp = &s.Policies
		mp = s.Methods[name]
		mpath = Join(spath+".methods", name)
	}
	return resolveMethod(builtin, &c.Defaults, level{spath, sp}, level{mpath, mp}, svc, name)
}

// resolveMethod resolves name of group (a method of a service, a route of a
// host), whose levels are gl and nl, over defaults and the built-in base.
func resolveMethod(base func() Policies, defaults *Policies, gl, nl level, group, name string) Method {
	dlv := level{"defaults", defaults}
	sp, mp := gl.p, nl.p
	svc := group
	svcEff := resolveFrom(base(), dlv, gl)
	eff := resolveFrom(base(), dlv, gl, nl)
	m := Method{Service: svc, Name: name, Key: svc, Observe: *eff.Mode == ModeObserve}
	shared, sharedLevels := svcEff, []*Policies{defaults, sp}
	if *svcEff.CircuitBreaker.KeyBy == KeyByMethod {
		m.Key, shared, sharedLevels = svc+"/"+name, eff, append(sharedLevels, mp)
	}
	if cb := shared.CircuitBreaker; *cb.Enabled {
		cfg, _ := BreakerConfig(cb, m.Key) // validated with the configuration
		m.Breaker = &cfg
	}
	m.FailureCodes, m.IgnoredCodes = eff.CircuitBreaker.FailureStatusCodes, eff.CircuitBreaker.IgnoredStatusCodes
	if bh := shared.Bulkhead; *bh.Enabled {
		cfg, _ := BulkheadConfig(bh, m.Key)
		m.Bulkhead = &cfg
	}
	if at := shared.AdaptiveThrottling; *at.Enabled {
		cfg, _ := ThrottlerConfig(at, m.Key)
		m.Throttler = &cfg
	}
	if rateLimiterOn(sharedLevels...) {
		cfg, _ := RateLimiterConfig(shared.RateLimiter, m.Key)
		m.RateLimiter = &cfg
	}
	r := eff.Retry
	m.RetryableCodes = r.RetryableStatusCodes
	switch {
	case hedgingOn(defaults, sp, mp):
		cfg, _ := HedgeConfig(eff.Hedging)
		cfg.Name = svc + "/" + name
		m.Hedge, m.NonFatalCodes = &cfg, eff.Hedging.NonFatalStatusCodes
	case *r.Enabled && *r.MaxAttempts > 1:
		cfg, _ := RetryConfig(r)
		cfg.Name = svc + "/" + name
		m.Retry = &cfg
	}
	if deadLetterOn(defaults, sp, mp) && shared.DeadLetter != nil {
		// The queue is the key's; which rejections defer is the method's.
		if dl, err := DeadLetterConfig(shared.DeadLetter); err == nil {
			if on, err := DeadLetterConfig(&DeadLetterSection{On: eff.DeadLetter.On}); err == nil && eff.DeadLetter.On != nil {
				dl.Config.On = on.Config.On
			}
			m.DeadLetter = &dl
		}
	}
	if t := eff.Timeout; *t.Enabled {
		m.PerAttempt, m.Overall = t.PerAttempt.D(), t.Overall.D()
		if mp != nil && mp.Timeout != nil {
			if mp.Timeout.Overall != nil {
				m.StreamOverall = mp.Timeout.Overall.D()
			}
			if mp.Timeout.PerAttempt != nil {
				m.StreamPerAttempt = mp.Timeout.PerAttempt.D()
			}
		}
	}
	return m
}
