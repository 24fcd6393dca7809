package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/health" // client-side health checking, turned on by the service config

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
)

// outlierConfig maps the outlierDetection section onto the balancer's
// Config; ok is false when the section is absent or switched off. The
// failure codes are the defaults' circuitBreaker.failureStatusCodes, so
// NOT_FOUND never ejects unless the breaker would count it too.
func outlierConfig(c *Config) (cfg outlier.Config, ok bool) {
	o := c.OutlierDetection
	if o == nil || (o.Enabled != nil && !*o.Enabled) {
		return cfg, false
	}
	setDur(&cfg.Interval, o.Interval)
	setDur(&cfg.BaseEjectionTime, o.BaseEjectionTime)
	setDur(&cfg.MaxEjectionTime, o.MaxEjectionTime)
	set(&cfg.MaxEjectionPercent, o.MaxEjectionPercent)
	if n := o.ConsecutiveFailures; n != nil {
		cfg.ConsecutiveFailures.Threshold = *n
		cfg.ConsecutiveFailures.Disabled = *n == 0
	}
	if f := o.FailurePercentage; f != nil {
		cfg.FailurePercentage.Disabled = f.Enabled != nil && !*f.Enabled
		set(&cfg.FailurePercentage.Threshold, f.Threshold)
		set(&cfg.FailurePercentage.MinimumHosts, f.MinimumHosts)
		set(&cfg.FailurePercentage.RequestVolume, f.RequestVolume)
	}
	if r := o.SuccessRate; r != nil {
		cfg.SuccessRate.Disabled = r.Enabled != nil && !*r.Enabled
		set(&cfg.SuccessRate.StdevFactor, r.StdevFactor)
		set(&cfg.SuccessRate.MinimumHosts, r.MinimumHosts)
		set(&cfg.SuccessRate.RequestVolume, r.RequestVolume)
	}
	if s := o.SlowCalls; s != nil {
		cfg.SlowCalls.Disabled = s.Enabled != nil && !*s.Enabled
		setDur(&cfg.SlowCalls.DurationThreshold, s.DurationThreshold)
		set(&cfg.SlowCalls.RateThreshold, s.RateThreshold)
		set(&cfg.SlowCalls.RequestVolume, s.RequestVolume)
	}
	set(&cfg.ChildPolicy, o.ChildPolicy)
	cfg.FailureStatusCodes = append([]codes.Code(nil), c.Method("", "").FailureCodes...) // the defaults'
	return cfg, true
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func setDur(dst *time.Duration, src *config.Duration) {
	if src != nil {
		*dst = src.D()
	}
}

// healthName is the healthCheck section's service name, or nil without one.
func healthName(c *Config) *string {
	h := c.HealthCheck
	if h == nil {
		return nil
	}
	name := ""
	set(&name, h.ServiceName)
	return &name
}

// sameDialConfig reports whether a and b install the same balancer and
// health checking.
func sameDialConfig(a, b *Config) bool {
	ao, aon := outlierConfig(a)
	bo, bon := outlierConfig(b)
	ah, bh := healthName(a), healthName(b)
	return aon == bon && (!aon || ao.Equal(bo)) && (ah == nil) == (bh == nil) && (ah == nil || *ah == *bh)
}

// checkOutlier validates outlierDetection and healthCheck, as a
// config.Check.
func checkOutlier(c *Config, add func(path, problem string)) {
	const consecutive = "outlierDetection.consecutiveFailures"
	negative := false
	if o := c.OutlierDetection; o != nil && o.ConsecutiveFailures != nil && *o.ConsecutiveFailures < 0 {
		add(consecutive, fmt.Sprintf("must be at least 0 (0 switches it off), got %d", *o.ConsecutiveFailures))
		negative = true
	}
	cfg, ok := outlierConfig(c)
	if !ok {
		return
	}
	zeroTakesDefault(c.OutlierDetection, add)
	err := cfg.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		path, problem, found := strings.Cut(e.Error(), ": ")
		if !found || !strings.HasPrefix(path, "outlierDetection") {
			path, problem = "outlierDetection", e.Error()
		}
		if negative && path == consecutive {
			continue // said above, with what 0 means
		}
		add(path, problem)
	}
}

// zeroTakesDefault reports the keys written as 0 that the balancer would
// silently replace with their default (its Config reads 0 as "unset"):
// maxEjectionPercent: 0 would eject up to half the endpoints, not none,
// and threshold: 0 would eject at 85 %, not at any failure.
func zeroTakesDefault(o *config.OutlierDetectionSection, add func(path, problem string)) {
	zero := func(path string, isZero bool, problem string) {
		if isZero {
			add("outlierDetection."+path, "must not be 0, which would take the default "+problem)
		}
	}
	isZero := func(p *int) bool { return p != nil && *p == 0 }
	zero("maxEjectionPercent", isZero(o.MaxEjectionPercent), "(50); to eject nothing, set enabled: false")
	const one = "; write 1, which judges the same"
	if f := o.FailurePercentage; f != nil {
		zero("failurePercentage.threshold", isZero(f.Threshold), "(85); write at least 1")
		zero("failurePercentage.minimumHosts", isZero(f.MinimumHosts), "(3)"+one)
		zero("failurePercentage.requestVolume", isZero(f.RequestVolume), "(50)"+one)
	}
	if r := o.SuccessRate; r != nil {
		zero("successRate.stdevFactor", r.StdevFactor != nil && *r.StdevFactor == 0, "(1.9); write a positive factor")
		zero("successRate.minimumHosts", isZero(r.MinimumHosts), "(3)"+one)
		zero("successRate.requestVolume", isZero(r.RequestVolume), "(100)"+one)
	}
	if s := o.SlowCalls; s != nil {
		zero("slowCalls.durationThreshold", s.DurationThreshold != nil && s.DurationThreshold.D() == 0, "(500ms); write a positive duration")
		zero("slowCalls.rateThreshold", isZero(s.RateThreshold), "(50); write at least 1")
		zero("slowCalls.requestVolume", isZero(s.RequestVolume), "(50)"+one)
	}
}

// serviceConfig returns the default service config that installs the
// outlier balancer and health checking, or "" when neither is configured.
func (c *Chain) serviceConfig() (string, error) {
	cfg := c.e.Config()
	ocfg, on := outlierConfig(cfg)
	health := healthName(cfg)
	if !on && health == nil {
		return "", nil
	}
	if !on {
		ocfg = outlier.Config{ConsecutiveFailures: outlier.ConsecutiveFailures{Disabled: true},
			FailurePercentage: outlier.FailurePercentage{Disabled: true}, SuccessRate: outlier.SuccessRate{Disabled: true},
			SlowCalls: outlier.SlowCalls{Disabled: true}}
	}
	if c.monitor != nil {
		ocfg.Monitor = c.monitor.Name()
	}
	return outlier.ServiceConfigJSON(ocfg, health)
}

// Outlier returns the monitor of the chain's outlier balancer — the ejected
// endpoints, readable from Go — or nil when the configuration has no
// outlierDetection section.
func (c *Chain) Outlier() *outlier.Monitor { return c.monitor }

// dialServiceConfig is the dial option of the service config, if any.
func (c *Chain) dialServiceConfig() ([]grpc.DialOption, error) {
	sc, err := c.serviceConfig()
	if err != nil || sc == "" {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithDefaultServiceConfig(sc)}, nil
}

var errOutlierReload = errors.New("outlierDetection and healthCheck are installed with the connection (DialOptions): dial again to change them")

// ejectionListener sends the outlier balancer's ejections and returns to the
// chain's observer, as EventEjected and EventReturned events, and to the
// listener of WithOutlierListener. The observer is told in a defer: a user
// listener that panics (the panic goes on up) does not keep the chain's
// metrics from hearing the change.
type ejectionListener struct {
	user outlier.Listener
	rec  resilience.Recorder
}

func (l ejectionListener) Ejected(addr, reason string) {
	if l.rec != nil {
		defer l.rec.Record(context.Background(), resilience.Event{Type: resilience.EventEjected, Endpoint: addr, Reason: ejectionReason(reason)})
	}
	if l.user != nil {
		l.user.Ejected(addr, reason)
	}
}

func (l ejectionListener) Returned(addr string) {
	if l.rec != nil {
		defer l.rec.Record(context.Background(), resilience.Event{Type: resilience.EventReturned, Endpoint: addr})
	}
	if l.user != nil {
		l.user.Returned(addr)
	}
}

// ejectionReason carries an ejection's reason (outlier.ReasonSlowCalls, …)
// as a resilience.Label: e.Reason.String() == outlier.ReasonSlowCalls.
type ejectionReason string

func (r ejectionReason) String() string { return string(r) }
