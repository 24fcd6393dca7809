package grpcmw

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/resilience"
)

// builtin holds the documented defaults of every key (docs/configuration.md).
func builtin() Policies {
	return Policies{
		CircuitBreaker: &CircuitBreakerSection{
			Enabled:                               Ptr(true),
			KeyBy:                                 Ptr(KeyByService),
			SlidingWindowType:                     Ptr("COUNT_BASED"),
			SlidingWindowSize:                     Ptr(100),
			MinimumNumberOfCalls:                  Ptr(20),
			FailureRateThreshold:                  Ptr(80.0),
			SlowCallDurationThreshold:             Dur(2 * time.Second),
			SlowCallRateThreshold:                 Ptr(100.0),
			WaitDurationInOpenState:               Dur(30 * time.Second),
			MaxWaitDurationInOpenState:            Dur(5 * time.Minute),
			PermittedNumberOfCallsInHalfOpenState: Ptr(2),
			MaxWaitDurationInHalfOpenState:        Dur(0),
			FailureStatusCodes:                    Codes{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.DataLoss},
			IgnoredStatusCodes:                    Codes{codes.Canceled},
			Mode:                                  Ptr("NORMAL"),
		},
		Retry: &RetrySection{
			Enabled:              Ptr(true),
			MaxAttempts:          Ptr(3),
			InitialBackoff:       Dur(100 * time.Millisecond),
			MaxBackoff:           Dur(2 * time.Second),
			BackoffMultiplier:    Ptr(2.0),
			Jitter:               Ptr(0.2),
			RetryableStatusCodes: Codes{codes.Unavailable},
		},
		Bulkhead: &BulkheadSection{
			Enabled:            Ptr(true),
			MaxConcurrentCalls: Ptr(100),
			MaxWaitDuration:    Dur(0),
		},
		Timeout: &TimeoutSection{
			Enabled:    Ptr(true),
			PerAttempt: Dur(time.Second),
			Overall:    Dur(3 * time.Second),
		},
		AdaptiveThrottling: builtinThrottling(),
		// Off unless a level writes it (rateLimiterOn); these are the values
		// a written section starts from.
		RateLimiter: &RateLimiterSection{
			LimitForPeriod:     Ptr(50),
			LimitRefreshPeriod: Dur(time.Second),
			TimeoutDuration:    Dur(0),
		},
		// Off unless a level writes it (hedgingOn).
		Hedging: &HedgingSection{
			MaxAttempts:         Ptr(3),
			HedgingDelay:        Dur(100 * time.Millisecond),
			NonFatalStatusCodes: Codes{codes.Unavailable},
		},
	}
}

// The values of circuitBreaker.keyBy.
const (
	KeyByService = "service"
	KeyByMethod  = "method"
)

// level is one place settings are written: defaults, a service, a method.
type level struct {
	path string
	p    *Policies
}

// resolve merges levels field by field, the last one winning, over the
// built-in defaults.
func resolve(levels ...level) Policies {
	out := builtin()
	for _, l := range levels {
		if l.p != nil {
			mergeInto(reflect.ValueOf(&out).Elem(), reflect.ValueOf(l.p).Elem())
		}
	}
	return out
}

// mergeInto copies every set (non-nil) field of src over dst, descending
// into structs.
func mergeInto(dst, src reflect.Value) {
	for i := range src.NumField() {
		s, d := src.Field(i), dst.Field(i)
		switch {
		case s.Kind() == reflect.Pointer && s.Type().Elem().Kind() == reflect.Struct && s.Type().Elem() != durationType:
			if s.IsNil() {
				continue
			}
			if d.IsNil() {
				d.Set(reflect.New(s.Type().Elem()))
			}
			mergeInto(d.Elem(), s.Elem())
		case s.Kind() == reflect.Pointer || s.Kind() == reflect.Slice:
			if !s.IsNil() {
				d.Set(s)
			}
		}
	}
}

// setAt returns the path of the most specific level that sets
// section.key, or fallback.
func setAt(levels []level, section, key, fallback string) string {
	for i := len(levels) - 1; i >= 0; i-- {
		if levels[i].p != nil && isSet(levels[i].p, section, key) {
			return levels[i].path + "." + section + "." + key
		}
	}
	return fallback + "." + section + "." + key
}

func setAnywhere(levels []level, section, key string) bool {
	for _, l := range levels {
		if l.p != nil && isSet(l.p, section, key) {
			return true
		}
	}
	return false
}

func isSet(p *Policies, section, key string) bool {
	s, ok := fieldsOf(reflect.ValueOf(p).Elem())[section]
	if !ok || s.IsNil() {
		return false
	}
	first, rest, nested := strings.Cut(key, ".")
	f, ok := fieldsOf(s.Elem())[first]
	if !ok || f.IsNil() {
		return false
	}
	if nested {
		g, ok := fieldsOf(f.Elem())[rest]
		return ok && !g.IsNil()
	}
	return true
}

// Validate checks the whole configuration, every level as it resolves, and
// returns every problem found, each naming its path. [ParseConfig] and [New]
// call it.
func (c *Config) Validate() error {
	if err := c.validate(nil); err != nil {
		return configError(unjoin(err)...)
	}
	return nil
}

// validate checks c. failed lists, per section path, the keys that could
// not be read from YAML: a problem that involves one of them is not reported
// again.
func (c *Config) validate(failed map[string][]string) error {
	var errs []error
	seen := map[string]bool{}
	add := func(path, problem string) {
		e := &PathError{Path: path, Problem: problem}
		if !seen[e.Error()] {
			seen[e.Error()] = true
			errs = append(errs, e)
		}
	}
	c.checkOutlier(add)
	c.checkCluster(add)
	if t := c.RetryThrottling; t != nil && len(failed["retryThrottling"]) == 0 {
		if _, err := throttleOf(t); err != nil {
			var oe *resilience.OptionError
			for _, e := range unjoin(err) {
				if errors.As(e, &oe) {
					add("retryThrottling."+oe.Option, oe.Problem+", got "+fmt.Sprint(oe.Value))
				}
			}
		}
	}
	defaults := level{path: "defaults", p: &c.Defaults}
	if kb := c.Defaults.CircuitBreaker; kb != nil && kb.KeyBy != nil {
		checkKeyBy(*kb.KeyBy, "defaults.circuitBreaker.keyBy", add)
	}
	checkLevel([]level{defaults}, "defaults", failed, add)
	for _, name := range sortedNames(c.Services) {
		svc := c.Services[name]
		spath := join("services", name)
		if strings.ContainsAny(name, "/ ") || strings.HasPrefix(name, ".") {
			add(spath, "want a full service name such as payment.PaymentService")
		}
		if svc == nil {
			continue
		}
		sl := []level{defaults, {path: spath, p: &svc.Policies}}
		if kb := svc.CircuitBreaker; kb != nil && kb.KeyBy != nil {
			checkKeyBy(*kb.KeyBy, spath+".circuitBreaker.keyBy", add)
		}
		checkLevel(sl, spath, failed, add)
		keyBy := *resolve(sl...).CircuitBreaker.KeyBy
		for _, m := range sortedNames(svc.Methods) {
			mp := svc.Methods[m]
			mpath := join(spath+".methods", m)
			if strings.ContainsAny(m, "/. ") {
				add(mpath, "want a method name such as Charge")
			}
			if mp == nil {
				continue
			}
			checkMethodLevel(mp, mpath, keyBy, add)
			checkLevel(append(sl, level{path: mpath, p: mp}), mpath, failed, add)
		}
	}
	return errors.Join(errs...)
}

func checkKeyBy(v, path string, add func(path, problem string)) {
	if v != KeyByService && v != KeyByMethod {
		add(path, fmt.Sprintf("must be service or method, got %q", clip(v)))
	}
}

// checkMethodLevel refuses what a method may not set: keyBy, and with
// keyBy: service anything of the shared breaker and bulkhead but
// classification.
func checkMethodLevel(p *Policies, path string, keyBy string, add func(path, problem string)) {
	if cb := p.CircuitBreaker; cb != nil {
		for _, k := range setKeys(cb) {
			switch {
			case k == "keyBy":
				add(path+".circuitBreaker.keyBy", "is set per service, not per method")
			case keyBy == KeyByService && k != "failureStatusCodes" && k != "ignoredStatusCodes":
				add(path+".circuitBreaker."+k, "with keyBy: service one breaker serves the whole service; a method may only set failureStatusCodes and ignoredStatusCodes (or use keyBy: method)")
			}
		}
	}
	if bh := p.Bulkhead; bh != nil && keyBy == KeyByService {
		for _, k := range setKeys(bh) {
			add(path+".bulkhead."+k, "with keyBy: service one bulkhead serves the whole service; set it on the service (or use keyBy: method)")
		}
	}
	if at := p.AdaptiveThrottling; at != nil && keyBy == KeyByService {
		for _, k := range setKeys(at) {
			add(path+".adaptiveThrottling."+k, "with keyBy: service one throttler serves the whole service; set it on the service (or use keyBy: method)")
		}
	}
	if rl := p.RateLimiter; rl != nil && keyBy == KeyByService {
		keys := setKeys(rl)
		if len(keys) == 0 {
			add(path+".rateLimiter", "with keyBy: service one rate limiter serves the whole service; set it on the service (or use keyBy: method)")
		}
		for _, k := range keys {
			add(path+".rateLimiter."+k, "with keyBy: service one rate limiter serves the whole service; set it on the service (or use keyBy: method)")
		}
	}
}

// setKeys lists the YAML keys a section sets.
func setKeys(section any) []string {
	var out []string
	for k, f := range fieldsOf(reflect.ValueOf(section).Elem()) {
		if !f.IsNil() {
			out = append(out, k)
		}
	}
	sortStrings(out)
	return out
}

// checkLevel resolves levels and checks the result through each policy's
// Config.Validate,
// reporting each problem at the level that set the key, unless it involves
// a key of failed (see validate).
func checkLevel(levels []level, here string, failed map[string][]string, add func(path, problem string)) {
	eff := resolve(levels...)
	// involved reports whether a key that could not be read takes part in
	// the problem: it is the key, or the problem names it.
	involved := func(section, key, problem string) bool {
		key, _, _ = strings.Cut(key, ".")
		for _, l := range levels {
			for _, k := range failed[l.path+"."+section] {
				if k == "" || k == key || strings.Contains(problem, k) {
					return true
				}
			}
		}
		return false
	}
	report := func(section string, err error) {
		for _, e := range unjoin(err) {
			var oe *resilience.OptionError
			var pe *PathError
			switch {
			case errors.As(e, &pe) && involved(section, pe.Path, pe.Problem),
				errors.As(e, &oe) && involved(section, oe.Option, oe.Problem),
				!errors.As(e, &pe) && !errors.As(e, &oe) && involved(section, "", e.Error()):
			case errors.As(e, &pe):
				add(setAt(levels, section, pe.Path, here), pe.Problem)
			case errors.As(e, &oe) && oe.Option == "minimumNumberOfCalls" && !setAnywhere(levels, section, oe.Option) && setAnywhere(levels, section, "slidingWindowSize"):
				// The user wrote a small window and inherited the minimum:
				// name the key they wrote.
				add(setAt(levels, section, "slidingWindowSize", here), fmt.Sprintf("must be at least minimumNumberOfCalls (%v, inherited) for a COUNT_BASED window, which could then never decide; set both", oe.Value))
			case errors.As(e, &oe):
				add(setAt(levels, section, oe.Option, here), oe.Problem+", got "+formatValue(oe.Value))
			default:
				add(here+"."+section, e.Error())
			}
		}
	}
	if _, err := breakerConfig(eff.CircuitBreaker, ""); err != nil {
		report("circuitBreaker", err)
	}
	if err := checkBreakerCodes(eff.CircuitBreaker); err != nil {
		report("circuitBreaker", err)
	}
	if _, err := retryConfig(eff.Retry); err != nil {
		report("retry", err)
	}
	if _, err := bulkheadConfig(eff.Bulkhead, ""); err != nil {
		report("bulkhead", err)
	}
	if err := checkTimeouts(eff.Timeout); err != nil {
		report("timeout", err)
	}
	if _, err := throttlerConfig(eff.AdaptiveThrottling, ""); err != nil {
		report("adaptiveThrottling", err)
	}
	if _, err := rateLimiterConfig(eff.RateLimiter, ""); err != nil {
		report("rateLimiter", err)
	}
	if _, err := hedgeConfig(eff.Hedging); err != nil {
		report("hedging", err)
	}
	checkHedging(levels, add)
}

func checkBreakerCodes(cb *CircuitBreakerSection) error {
	var errs []error
	for _, c := range cb.FailureStatusCodes {
		if c == codes.OK {
			errs = append(errs, &PathError{Path: "failureStatusCodes", Problem: "OK cannot be a failure"})
		}
		if cb.IgnoredStatusCodes.has(c) {
			errs = append(errs, &PathError{Path: "ignoredStatusCodes", Problem: codeName(c) + " is also in failureStatusCodes; a code is a failure or ignored, not both"})
		}
	}
	if cb.IgnoredStatusCodes.has(codes.OK) {
		errs = append(errs, &PathError{Path: "ignoredStatusCodes", Problem: "OK cannot be ignored"})
	}
	return errors.Join(errs...)
}

func checkTimeouts(t *TimeoutSection) error {
	var errs []error
	if t.PerAttempt.D() < 0 {
		errs = append(errs, &PathError{Path: "perAttempt", Problem: "must not be negative (0 means none), got " + t.PerAttempt.D().String()})
	}
	if t.Overall.D() < 0 {
		errs = append(errs, &PathError{Path: "overall", Problem: "must not be negative (0 means none), got " + t.Overall.D().String()})
	}
	return errors.Join(errs...)
}

// unjoin flattens errors.Join and %w wrapping into the joined errors.
func unjoin(err error) []error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			var out []error
			for _, e := range u.Unwrap() {
				out = append(out, unjoin(e)...)
			}
			return out
		case interface{ Unwrap() error }:
			if _, ok := err.(*resilience.OptionError); ok {
				return []error{err}
			}
			if next := u.Unwrap(); next != nil {
				err = next
				continue
			}
		}
		return []error{err}
	}
}

func formatValue(v any) string {
	if d, ok := v.(time.Duration); ok {
		return d.String()
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", clip(s))
	}
	return fmt.Sprint(v)
}
