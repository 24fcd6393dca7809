package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
)

// AdaptiveThrottlingSection is the adaptiveThrottling section (client-side
// adaptive throttling, docs/overload.md). It is keyed like the circuit
// breaker: one throttler per service by default.
type AdaptiveThrottlingSection struct {
	Enabled *bool `yaml:"enabled,omitempty"`
	// Multiplier is K: requests the backend may get per request it accepts.
	Multiplier       *float64  `yaml:"multiplier,omitempty"`
	Window           *Duration `yaml:"window,omitempty"`
	MinimumRequests  *int      `yaml:"minimumRequests,omitempty"`
	MaxRejectionRate *float64  `yaml:"maxRejectionRate,omitempty"` // percent
}

// ThrottlerConfig maps a resolved adaptiveThrottling section onto the
// throttler's Config and checks it.
func ThrottlerConfig(s *AdaptiveThrottlingSection, name string) (throttler.Config, error) {
	c := throttler.Config{Name: name, Multiplier: *s.Multiplier, Window: s.Window.D(),
		MinimumRequests: *s.MinimumRequests, MaxRejectionRate: *s.MaxRejectionRate}
	return c, c.Validate()
}

// RateLimiterSection is the rateLimiter section; see docs/ratelimiter.md.
// Unlike the other sections it is off unless some level writes it: a
// written section is on unless it says enabled: false.
type RateLimiterSection struct {
	Enabled            *bool     `yaml:"enabled,omitempty"`
	LimitForPeriod     *int      `yaml:"limitForPeriod,omitempty"`
	LimitRefreshPeriod *Duration `yaml:"limitRefreshPeriod,omitempty"`
	TimeoutDuration    *Duration `yaml:"timeoutDuration,omitempty"`
}

// rateLimiterOn reports whether the levels turn the rate limiter on: one of
// them writes the section, and the last enabled written is not false.
func rateLimiterOn(levels ...*Policies) bool {
	written, on := false, true
	for _, p := range levels {
		if p == nil || p.RateLimiter == nil {
			continue
		}
		written = true
		if e := p.RateLimiter.Enabled; e != nil {
			on = *e
		}
	}
	return written && on
}

// RateLimiterConfig maps a resolved rateLimiter section onto the limiter's
// Config, once, and checks it.
func RateLimiterConfig(r *RateLimiterSection, name string) (ratelimiter.Config, error) {
	c := ratelimiter.Config{
		Name:               name,
		LimitForPeriod:     *r.LimitForPeriod,
		LimitRefreshPeriod: r.LimitRefreshPeriod.D(),
		TimeoutDuration:    r.TimeoutDuration.D(),
	}
	return c, c.Validate()
}

// HedgingSection is the hedging section, gRFC A6's hedgingPolicy; see
// docs/hedging.md. Like rateLimiter it is off unless some level writes it,
// and it takes retry's place on the methods it covers: an enabled retry
// written for the same method is an error naming both.
type HedgingSection struct {
	Enabled             *bool     `yaml:"enabled,omitempty"`
	MaxAttempts         *int      `yaml:"maxAttempts,omitempty"`
	HedgingDelay        *Duration `yaml:"hedgingDelay,omitempty"`
	NonFatalStatusCodes Codes     `yaml:"nonFatalStatusCodes,omitempty"`
}

// hedgingOn reports whether the levels turn hedging on: one of them writes
// the section, and the last enabled written is not false.
func hedgingOn(levels ...*Policies) bool {
	written, on := false, true
	for _, p := range levels {
		if p == nil || p.Hedging == nil {
			continue
		}
		written = true
		if e := p.Hedging.Enabled; e != nil {
			on = *e
		}
	}
	return written && on
}

// HedgeConfig maps a resolved hedging section onto the policy's config and
// checks it, with its status codes.
func HedgeConfig(h *HedgingSection) (retry.HedgeConfig, error) {
	c := retry.HedgeConfig{MaxAttempts: *h.MaxAttempts, HedgingDelay: h.HedgingDelay.D()}
	errs := []error{c.Validate()}
	if h.NonFatalStatusCodes.Has(codes.OK) {
		errs = append(errs, &PathError{Path: "nonFatalStatusCodes", Problem: "OK is not a failure"})
	}
	return c, errors.Join(errs...)
}

// checkHedging refuses hedging and an enabled retry that the configuration
// writes for the same method. A retry left at its built-in default yields
// to hedging.
func checkHedging(levels []level, add func(path, problem string)) {
	ps := make([]*Policies, len(levels))
	for i, l := range levels {
		ps[i] = l.p
	}
	if !hedgingOn(ps...) {
		return
	}
	r := resolve(levels...).Retry
	if !*r.Enabled || *r.MaxAttempts <= 1 {
		return
	}
	hpath, rpath := "", ""
	for _, l := range levels {
		if l.p == nil {
			continue
		}
		if l.p.Hedging != nil {
			hpath = l.path + ".hedging"
		}
		if l.p.Retry != nil {
			rpath = l.path + ".retry"
		}
	}
	if rpath == "" {
		return // the built-in retry: hedging takes its place
	}
	add(hpath, "cannot be used with retry on the same method, and "+rpath+" is enabled for it; set retry: { enabled: false } where hedging is on (hedging takes retry's place)")
}

// ClusterSection is the cluster section: the client's breakers share their
// decisions with the other instances of the client through Redis
// (docs/cluster.md). Nothing of it is on a call's path.
type ClusterSection struct {
	Enabled *bool         `yaml:"enabled,omitempty"`
	Redis   *RedisSection `yaml:"redis,omitempty"`
	// Namespace prefixes every key and the channel. Unwritten, it is
	// meshless@<target>, from the target of the chain's first call: the
	// pods of one client (same target, same configuration) share, unrelated
	// clients on the same Redis do not. Written, every client that writes
	// the same namespace shares its breakers by name, on purpose.
	Namespace *string `yaml:"namespace,omitempty"`
	// SyncInterval is how often an instance publishes its windows and reads
	// the cluster's. Default 1s.
	SyncInterval *Duration `yaml:"syncInterval,omitempty"`
	// DecideOn is local, cluster or either: which rates may open a breaker.
	// Default either.
	DecideOn *string `yaml:"decideOn,omitempty"`
}

// RedisSection is cluster.redis: where Redis is, as host:port (addr) or as a
// URL (url: redis://[user:password@]host:port/db, rediss:// for TLS), one of
// the two. grpcmw.WithRedisClient (httpmw.WithRedisClient) gives a client
// built in Go instead.
type RedisSection struct {
	Addr *string `yaml:"addr,omitempty"`
	URL  *string `yaml:"url,omitempty"`
}

// ClusterConfig maps the cluster section onto cluster.Config; ok is false
// when the section is absent or switched off.
func (c *Config) ClusterConfig() (cfg cluster.Config, ok bool, err error) {
	s := c.Cluster
	if s == nil || (s.Enabled != nil && !*s.Enabled) {
		return cfg, false, nil
	}
	cfg = cluster.DefaultConfig()
	set(&cfg.Namespace, s.Namespace)
	if s.SyncInterval != nil {
		cfg.SyncInterval = s.SyncInterval.D()
	}
	var errs []error
	if s.DecideOn != nil {
		d, derr := cluster.ParseDecideOn(*s.DecideOn)
		cfg.DecideOn = d
		errs = append(errs, derr)
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, true, err
	}
	return cfg, true, cfg.Validate()
}

// Options reads cluster.redis; nil options without either key. No error
// shows a password: an address is shown with its user information hidden
// (redactAddr), whichever key it came through.
func (s *RedisSection) Options() (*redis.Options, error) {
	if s == nil || (s.Addr == nil && s.URL == nil) {
		return nil, nil
	}
	if s.Addr != nil && s.URL != nil {
		return nil, &PathError{Path: "cluster.redis", Problem: "set addr or url, not both"}
	}
	if s.Addr != nil {
		addr := *s.Addr
		switch {
		case strings.Contains(addr, "://"):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379, got a URL (%q): write it as url", Clip(redactAddr(addr)))}
		case strings.ContainsAny(addr, "@/"):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379 (a user or password goes in url), got %q", Clip(redactAddr(addr)))}
		case !validHostPort(addr):
			return nil, &PathError{Path: "cluster.redis.addr", Problem: fmt.Sprintf("want host:port such as 127.0.0.1:6379, got %q", Clip(addr))}
		}
		return &redis.Options{Addr: addr}, nil
	}
	o, err := redis.ParseURL(*s.URL)
	if err == nil && o.Network != "unix" && !validHostPort(o.Addr) {
		err = fmt.Errorf("want a port in [1, 65535], got %q", o.Addr)
	}
	if err != nil {
		return nil, &PathError{Path: "cluster.redis.url", Problem: "want redis://[user:password@]host:port/db: " + urlProblem(*s.URL, err)}
	}
	return o, nil
}

func validHostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 1 && n <= 65535
}

// redactAddr hides the user information of a Redis address: a URL's
// password (user kept, as net/url's Redacted does), and everything before
// the last @ of an address that is not a URL.
func redactAddr(addr string) string {
	if strings.Contains(addr, "://") {
		return cluster.Redact(addr)
	}
	if at := strings.LastIndex(addr, "@"); at >= 0 {
		return "xxxxx" + addr[at:]
	}
	return addr
}

// urlProblem describes err, the problem with the URL raw, without raw's
// user information: the parser's message on the URL with it hidden, or,
// when that URL is valid, a message that the user information is not.
func urlProblem(raw string, err error) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return cluster.Redact(err.Error()) // no user information
	}
	hidden := scheme + "://xxxxx" + rest[at:]
	if _, herr := redis.ParseURL(hidden); herr != nil {
		return strings.ReplaceAll(herr.Error(), hidden, Clip(hidden))
	}
	if o, _ := redis.ParseURL(hidden); !validHostPort(o.Addr) {
		return err.Error() // the port: raw's user information is not in it
	}
	return "its user or password is not valid in a URL (percent-encode : / ? # [ ] @ in them), in " + strconv.Quote(Clip(hidden))
}

// checkCluster validates the cluster section.
func (c *Config) checkCluster(add func(path, problem string)) {
	if c.Cluster == nil {
		return
	}
	if _, err := c.Cluster.Redis.Options(); err != nil {
		var pe *PathError
		if errors.As(err, &pe) {
			add(pe.Path, pe.Problem)
		}
	}
	_, _, err := c.ClusterConfig()
	for _, e := range unjoin(err) {
		var oe *resilience.OptionError
		if errors.As(e, &oe) {
			add("cluster."+oe.Option, oe.Problem+", got "+formatValue(oe.Value))
		} else if e != nil {
			add("cluster", e.Error())
		}
	}
}

// SameCluster reports whether a and b configure the same cluster.
func SameCluster(a, b *Config) bool {
	ac, aon, _ := a.ClusterConfig()
	bc, bon, _ := b.ClusterConfig()
	if aon != bon || (aon && ac != bc) {
		return false
	}
	if !aon {
		return true
	}
	if (a.Cluster.Namespace == nil) != (b.Cluster.Namespace == nil) {
		return false // derived from the target, or shared on purpose
	}
	ar, br := a.Cluster.Redis, b.Cluster.Redis
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	addr := func(r *RedisSection) (string, string) {
		if r == nil {
			return "", ""
		}
		return str(r.Addr), str(r.URL)
	}
	a1, a2 := addr(ar)
	b1, b2 := addr(br)
	return a1 == b1 && a2 == b2
}

// OutlierDetectionSection is the outlierDetection section: per-endpoint
// ejection in the load balancer that grpcmw's Chain.DialOptions installs. See
// docs/outlier.md for each key.
type OutlierDetectionSection struct {
	Enabled            *bool     `yaml:"enabled,omitempty"`
	Interval           *Duration `yaml:"interval,omitempty"`
	BaseEjectionTime   *Duration `yaml:"baseEjectionTime,omitempty"`
	MaxEjectionTime    *Duration `yaml:"maxEjectionTime,omitempty"`
	MaxEjectionPercent *int      `yaml:"maxEjectionPercent,omitempty"`
	// ConsecutiveFailures ejects an endpoint after this many failures in a
	// row; 0 switches the detector off.
	ConsecutiveFailures *int                      `yaml:"consecutiveFailures,omitempty"`
	FailurePercentage   *FailurePercentageSection `yaml:"failurePercentage,omitempty"`
	SuccessRate         *SuccessRateSection       `yaml:"successRate,omitempty"`
	SlowCalls           *SlowCallsSection         `yaml:"slowCalls,omitempty"`
	ChildPolicy         *string                   `yaml:"childPolicy,omitempty"`
}

// FailurePercentageSection is outlierDetection.failurePercentage.
type FailurePercentageSection struct {
	Enabled       *bool `yaml:"enabled,omitempty"`
	Threshold     *int  `yaml:"threshold,omitempty"`
	MinimumHosts  *int  `yaml:"minimumHosts,omitempty"`
	RequestVolume *int  `yaml:"requestVolume,omitempty"`
}

// SuccessRateSection is outlierDetection.successRate.
type SuccessRateSection struct {
	Enabled       *bool    `yaml:"enabled,omitempty"`
	StdevFactor   *float64 `yaml:"stdevFactor,omitempty"`
	MinimumHosts  *int     `yaml:"minimumHosts,omitempty"`
	RequestVolume *int     `yaml:"requestVolume,omitempty"`
}

// SlowCallsSection is outlierDetection.slowCalls.
type SlowCallsSection struct {
	Enabled           *bool     `yaml:"enabled,omitempty"`
	DurationThreshold *Duration `yaml:"durationThreshold,omitempty"`
	RateThreshold     *int      `yaml:"rateThreshold,omitempty"`
	RequestVolume     *int      `yaml:"requestVolume,omitempty"`
}

// HealthCheckSection is the healthCheck section: gRPC's own client-side
// health checking (grpc.health.v1 Watch), so that an endpoint that reports
// NOT_SERVING gets no calls.
type HealthCheckSection struct {
	// ServiceName is the service whose health is watched; "" is the server's
	// overall health.
	ServiceName *string `yaml:"serviceName,omitempty"`
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func durOf(dst *Duration) func(*Duration) {
	return func(src *Duration) {
		if src != nil {
			*dst = *src
		}
	}
}
