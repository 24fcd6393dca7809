package outlier

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
)

// Config configures the balancer. It is what the outlierDetection section of
// meshless's YAML maps onto, and what the balancer's JSON service-config form
// ([ServiceConfigJSON]) carries.
//
// Every zero field means its documented default, so the zero Config is valid:
// every detector on, with the defaults below. Switch a detector off with its
// Disabled field.
//
// A Config is a value; it is comparable with [Config.Equal] (the
// FailureStatusCodes slice keeps it from being comparable with ==).
type Config struct {
	// Interval is how often the rate detectors run and ejected endpoints are
	// considered for return; counters restart every interval. Default 10s.
	Interval time.Duration
	// BaseEjectionTime is an endpoint's ejection time, multiplied by how many
	// times it has been ejected recently. Default 30s.
	BaseEjectionTime time.Duration
	// MaxEjectionTime caps the ejection time (but never below
	// BaseEjectionTime). Default 300s.
	MaxEjectionTime time.Duration
	// MaxEjectionPercent is the largest share of endpoints ejected at once,
	// in percent, rounded down; at least one endpoint always serves, whatever
	// this says. Default 50.
	MaxEjectionPercent int

	ConsecutiveFailures ConsecutiveFailures
	FailurePercentage   FailurePercentage
	SuccessRate         SuccessRate
	SlowCalls           SlowCalls

	// FailureStatusCodes are the codes that count as a failed call. Default
	// UNAVAILABLE, INTERNAL, UNKNOWN, DEADLINE_EXCEEDED, DATA_LOSS. Whatever
	// it lists, CANCELLED and a rejection a meshless server relayed that
	// says nothing of its health (a bulkhead full, a rate limit, a throttle)
	// are ignored, and an error that is not a gRPC status is a failure.
	FailureStatusCodes []codes.Code

	// ChildPolicy names the registered balancer that picks among the
	// endpoints not ejected. Default "round_robin".
	ChildPolicy string

	// Monitor names a [Monitor] (its [Monitor.Name]) that supplies the clock
	// and listener and reports the ejected endpoints; "" for none.
	Monitor string
}

// ConsecutiveFailures ejects an endpoint as soon as this many of its calls in
// a row have failed.
type ConsecutiveFailures struct {
	// Disabled switches the detector off (enabled: false in YAML and JSON).
	Disabled bool
	// Threshold is the number of failures in a row. Default 5.
	Threshold int
}

// FailurePercentage ejects, at each interval, every endpoint whose share of
// failed calls reached Threshold.
type FailurePercentage struct {
	// Disabled switches the detector off.
	Disabled bool
	// Threshold in percent, in [0, 100]; an endpoint is ejected when its
	// failure percentage is >= Threshold. Default 85.
	Threshold int
	// MinimumHosts is how many endpoints must have reached RequestVolume in
	// the interval for the detector to run. Default 3.
	MinimumHosts int
	// RequestVolume is how many calls an endpoint needs within one interval
	// to be judged. Default 50.
	RequestVolume int
}

// SuccessRate ejects, at each interval, every endpoint whose success rate is
// below mean - StdevFactor × stdev of the endpoints' success rates.
type SuccessRate struct {
	// Disabled switches the detector off.
	Disabled bool
	// StdevFactor multiplies the standard deviation. Default 1.9.
	StdevFactor float64
	// MinimumHosts and RequestVolume are as in [FailurePercentage].
	// Defaults 3 and 100.
	MinimumHosts  int
	RequestVolume int
}

// SlowCalls ejects, at each interval, every endpoint whose share of calls
// slower than DurationThreshold reached RateThreshold.
type SlowCalls struct {
	// Disabled switches the detector off.
	Disabled bool
	// DurationThreshold: a call that took longer is slow. A unary call
	// through grpcmw's interceptor is timed by it, from its attempt's start
	// (before the attempt's gates) to its end, exactly. Any other call is
	// timed from pick to done, to a tick of 1/64 of DurationThreshold, at
	// most 1 ms: it counts as slow only if it took longer than
	// DurationThreshold, and one that took longer by less than a tick may
	// be missed. Default 500ms.
	DurationThreshold time.Duration
	// RateThreshold in percent, in (0, 100]. Default 50.
	RateThreshold int
	// RequestVolume is how many calls an endpoint needs within one interval
	// to be judged. Default 50.
	RequestVolume int
}

// DefaultFailureStatusCodes are the codes that count as failures unless
// Config.FailureStatusCodes says otherwise.
func DefaultFailureStatusCodes() []codes.Code {
	return []codes.Code{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.DataLoss}
}

// Equal reports whether c and o are the same configuration, defaults
// resolved.
func (c Config) Equal(o Config) bool {
	return c.key() == o.key()
}

// configKey is a Config with defaults resolved, in comparable form.
type configKey struct {
	interval, base, maxTime time.Duration
	maxPercent              int
	cf                      ConsecutiveFailures
	fp                      FailurePercentage
	sr                      SuccessRate
	sc                      SlowCalls
	codes                   uint32
	child, monitor          string
}

func (c Config) key() configKey {
	c = c.withDefaults()
	return configKey{c.Interval, c.BaseEjectionTime, c.MaxEjectionTime, c.MaxEjectionPercent,
		c.ConsecutiveFailures, c.FailurePercentage, c.SuccessRate, c.SlowCalls,
		codeSet(c.FailureStatusCodes), c.ChildPolicy, c.Monitor}
}

func codeSet(cs []codes.Code) (set uint32) {
	for _, c := range cs {
		if c <= 16 {
			set |= 1 << c
		}
	}
	return set
}

// minInterval is the shortest interval between two runs of the detectors
// (outlierDetection.interval), 0 aside (the default, 10s).
const minInterval = 10 * time.Millisecond

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	defInt := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	def(&c.Interval, 10*time.Second)
	def(&c.BaseEjectionTime, 30*time.Second)
	def(&c.MaxEjectionTime, 300*time.Second)
	defInt(&c.MaxEjectionPercent, 50)
	defInt(&c.ConsecutiveFailures.Threshold, 5)
	defInt(&c.FailurePercentage.Threshold, 85)
	defInt(&c.FailurePercentage.MinimumHosts, 3)
	defInt(&c.FailurePercentage.RequestVolume, 50)
	if c.SuccessRate.StdevFactor == 0 {
		c.SuccessRate.StdevFactor = 1.9
	}
	defInt(&c.SuccessRate.MinimumHosts, 3)
	defInt(&c.SuccessRate.RequestVolume, 100)
	def(&c.SlowCalls.DurationThreshold, 500*time.Millisecond)
	defInt(&c.SlowCalls.RateThreshold, 50)
	defInt(&c.SlowCalls.RequestVolume, 50)
	if len(c.FailureStatusCodes) == 0 {
		c.FailureStatusCodes = DefaultFailureStatusCodes()
	}
	if c.ChildPolicy == "" {
		c.ChildPolicy = "round_robin"
	}
	return c
}

// Validate reports every invalid field, each by its path in meshless's
// configuration (outlierDetection.…). Zero fields are valid: they take their
// defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(path, rule string, got any) {
		errs = append(errs, fmt.Errorf("outlierDetection.%s: must be %s, got %v", path, rule, got))
	}
	pos := func(path string, d time.Duration) {
		if d < 0 {
			bad(path, ">= 0", d)
		}
	}
	nonNeg := func(path string, v int) {
		if v < 0 {
			bad(path, ">= 0", v)
		}
	}
	pct := func(path string, v int) {
		if v < 0 || v > 100 {
			bad(path, "in [0, 100]", v)
		}
	}
	pos("interval", c.Interval)
	if c.Interval > 0 && c.Interval < minInterval {
		// Each interval re-arms the detectors' timer: 1ns kept a core busy
		// per connection.
		bad("interval", "0 (the default, 10s) or at least "+minInterval.String(), c.Interval)
	}
	pos("baseEjectionTime", c.BaseEjectionTime)
	pos("maxEjectionTime", c.MaxEjectionTime)
	pct("maxEjectionPercent", c.MaxEjectionPercent)
	nonNeg("consecutiveFailures", c.ConsecutiveFailures.Threshold)
	pct("failurePercentage.threshold", c.FailurePercentage.Threshold)
	nonNeg("failurePercentage.minimumHosts", c.FailurePercentage.MinimumHosts)
	nonNeg("failurePercentage.requestVolume", c.FailurePercentage.RequestVolume)
	switch f := c.SuccessRate.StdevFactor; {
	case f < 0 || f != f:
		bad("successRate.stdevFactor", ">= 0", f)
	case math.IsInf(f, 1): // no service config can carry it (JSON)
		bad("successRate.stdevFactor", "finite", f)
	}
	nonNeg("successRate.minimumHosts", c.SuccessRate.MinimumHosts)
	nonNeg("successRate.requestVolume", c.SuccessRate.RequestVolume)
	pos("slowCalls.durationThreshold", c.SlowCalls.DurationThreshold)
	pct("slowCalls.rateThreshold", c.SlowCalls.RateThreshold)
	nonNeg("slowCalls.requestVolume", c.SlowCalls.RequestVolume)
	for i, code := range c.FailureStatusCodes {
		if code > 16 {
			bad(fmt.Sprintf("failureStatusCodes[%d]", i), "a gRPC code 0-16", uint32(code))
		}
	}
	// Compared as the balancer compares them: with the defaults of those
	// not written (30s and 300s).
	if d := c.withDefaults(); c.BaseEjectionTime >= 0 && c.MaxEjectionTime >= 0 && d.MaxEjectionTime < d.BaseEjectionTime {
		if c.MaxEjectionTime > 0 {
			errs = append(errs, fmt.Errorf("outlierDetection.maxEjectionTime: must be >= baseEjectionTime (%v), got %v",
				d.BaseEjectionTime, c.MaxEjectionTime))
		} else {
			errs = append(errs, fmt.Errorf("outlierDetection.baseEjectionTime: must be <= maxEjectionTime (%v, its default), got %v",
				d.MaxEjectionTime, c.BaseEjectionTime))
		}
	}
	if p := c.ChildPolicy; p != "" {
		switch {
		case p == Name:
			errs = append(errs, fmt.Errorf("outlierDetection.childPolicy: must not be %s itself", Name))
		case p == "pick_first":
			errs = append(errs, errors.New("outlierDetection.childPolicy: pick_first sends every call to one endpoint, "+
				"so ejecting it would fail every call; use a policy that balances over endpoints, such as round_robin"))
		case balancer.Get(p) == nil:
			errs = append(errs, fmt.Errorf("outlierDetection.childPolicy: no balancer named %q is registered", p))
		}
	}
	if strings.ContainsAny(c.Monitor, "\"\\") {
		bad("monitor", "a name from Monitor.Name", c.Monitor)
	}
	return errors.Join(errs...)
}
