package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/internal/yamldecode"
	"github.com/meshless/meshless/resilience"
)

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
	s, ok := yamldecode.Fields(reflect.ValueOf(p).Elem())[section]
	if !ok || s.IsNil() {
		return false
	}
	first, rest, nested := strings.Cut(key, ".")
	f, ok := yamldecode.Fields(s.Elem())[first]
	if !ok || f.IsNil() {
		return false
	}
	if nested {
		g, ok := yamldecode.Fields(f.Elem())[rest]
		return ok && !g.IsNil()
	}
	return true
}

// Validate checks the whole configuration, every level as it resolves, and
// returns every problem found, each naming its path, in an [*Error]. checks
// are a transport's own, run first. [Parse] calls it, and so does every
// transport's constructor.
func (c *Config) Validate(checks ...Check) error {
	if err := c.validate(nil, nil, checks); err != nil {
		return configError(unjoin(err)...)
	}
	return nil
}

// validate checks c. failed lists, per section path, the keys that could
// not be read from YAML: a problem that involves one of them is not reported
// again. lines holds the line of each key read from YAML, for the problems
// checks report.
func (c *Config) validate(failed map[string][]string, lines map[string]int, checks []Check) error {
	var errs []error
	seen := map[string]bool{}
	// addAt reports a problem once, the first time it is met: at the level
	// that sets the key, or, when the key's level alone has no problem, at
	// the first level that inherits the key and meets it (in).
	addAt := func(path string, line int, problem, in string) {
		if k := path + ": " + problem; !seen[k] {
			seen[k] = true
			errs = append(errs, &PathError{Path: path, Line: line, Problem: problem, in: in})
		}
	}
	add := func(path, problem string) { addAt(path, 0, problem, "") }
	addIn := func(path, problem, in string) { addAt(path, 0, problem, in) }
	for _, check := range checks {
		check(c, func(path, problem string) { addAt(path, lines[path], problem, "") })
	}
	c.checkCluster(add)
	if t := c.RetryThrottling; t != nil && len(failed["retryThrottling"]) == 0 {
		if _, err := c.Throttling().NewThrottle(); err != nil {
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
	checkCodes(&c.Defaults, "defaults", false, add)
	checkLevel([]level{defaults}, "defaults", failed, addIn)
	for _, name := range sortedNames(c.Services) {
		svc := c.Services[name]
		spath := Join("services", name)
		if !fullName(name) {
			add(spath, "want a full service name such as payment.PaymentService")
		}
		if svc == nil {
			continue
		}
		sl := []level{defaults, {path: spath, p: &svc.Policies}}
		if kb := svc.CircuitBreaker; kb != nil && kb.KeyBy != nil {
			checkKeyBy(*kb.KeyBy, spath+".circuitBreaker.keyBy", add)
		}
		checkCodes(&svc.Policies, spath, false, add)
		checkLevel(sl, spath, failed, addIn)
		keyBy := *resolve(sl...).CircuitBreaker.KeyBy
		for _, m := range sortedNames(svc.Methods) {
			mp := svc.Methods[m]
			mpath := Join(spath+".methods", m)
			if !identifier(m) {
				add(mpath, "want a method name such as Charge")
			}
			if mp == nil {
				continue
			}
			checkMethodLevel(mp, mpath, keyBy, add)
			if mp.DeadLetter != nil && keyBy == KeyByService && c.Defaults.DeadLetter == nil && svc.DeadLetter == nil {
				add(mpath+".deadLetter", "with keyBy: service the queue is the service's: write deadLetter on the service or in defaults, and here only on and enabled")
			}
			checkCodes(mp, mpath, false, add)
			checkLevel(append(sl, level{path: mpath, p: mp}), mpath, failed, addIn)
		}
	}
	c.checkHosts(failed, add, addIn)
	return errors.Join(errs...)
}

func checkKeyBy(v, path string, add func(path, problem string)) {
	if v != KeyByService && v != KeyByMethod {
		add(path, fmt.Sprintf("must be service or method, got %q", Clip(v)))
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
	if dl := p.DeadLetter; dl != nil && keyBy == KeyByService {
		if len(setKeys(dl)) == 0 {
			add(path+".deadLetter", "with keyBy: service one dead-letter queue serves the whole service; write it on the service (or use keyBy: method), and here only on and enabled")
		}
		for _, k := range setKeys(dl) {
			if k != "on" && k != "enabled" {
				add(path+".deadLetter."+k, "with keyBy: service one dead-letter queue serves the whole service; a method may only set on and enabled (or use keyBy: method)")
			}
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
	for k, f := range yamldecode.Fields(reflect.ValueOf(section).Elem()) {
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
func checkLevel(levels []level, here string, failed map[string][]string, add func(path, problem, in string)) {
	checkLevelFrom(builtin, levels, here, failed, add)
}

// checkLevelFrom is checkLevel over the built-in defaults base.
func checkLevelFrom(base func() Policies, levels []level, here string, failed map[string][]string, addIn func(path, problem, in string)) {
	// add reports a problem with the key at path, set at here or at a
	// level above it, which here then inherits.
	add := func(path, problem string) {
		in := ""
		if !strings.HasPrefix(path, here+".") {
			in = here
		}
		addIn(path, problem, in)
	}
	eff := resolveFrom(base(), levels...)
	if m := *eff.Mode; m != ModeEnforce && m != ModeObserve {
		path := here + ".mode"
		for _, l := range levels {
			if l.p != nil && l.p.Mode != nil {
				path = l.path + ".mode"
			}
		}
		add(path, fmt.Sprintf("must be enforce or observe, got %q", Clip(m)))
	}
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
	if _, err := BreakerConfig(eff.CircuitBreaker, ""); err != nil {
		report("circuitBreaker", err)
	}
	if err := checkBreakerCodes(eff.CircuitBreaker); err != nil {
		report("circuitBreaker", err)
	}
	if _, err := RetryConfig(eff.Retry); err != nil {
		report("retry", err)
	}
	if _, err := BulkheadConfig(eff.Bulkhead, ""); err != nil {
		report("bulkhead", err)
	}
	if err := checkTimeouts(eff.Timeout); err != nil {
		report("timeout", err)
	}
	if _, err := ThrottlerConfig(eff.AdaptiveThrottling, ""); err != nil {
		report("adaptiveThrottling", err)
	}
	if _, err := RateLimiterConfig(eff.RateLimiter, ""); err != nil {
		report("rateLimiter", err)
	}
	if _, err := HedgeConfig(eff.Hedging); err != nil {
		report("hedging", err)
	}
	if eff.DeadLetter != nil {
		if _, err := DeadLetterConfig(eff.DeadLetter); err != nil {
			report("deadLetter", err)
		}
	}
	checkHedging(levels, add)
}

func checkBreakerCodes(cb *CircuitBreakerSection) error {
	var errs []error
	for _, c := range cb.FailureStatusCodes {
		if c == codes.OK {
			errs = append(errs, &PathError{Path: "failureStatusCodes", Problem: "OK cannot be a failure"})
		}
		if cb.IgnoredStatusCodes.Has(c) {
			errs = append(errs, &PathError{Path: "ignoredStatusCodes", Problem: CodeName(c) + " is also in failureStatusCodes; a code is a failure or ignored, not both"})
		}
	}
	if cb.IgnoredStatusCodes.Has(codes.OK) {
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
		return fmt.Sprintf("%q", Clip(s))
	}
	return fmt.Sprint(v)
}

// identifier reports whether s is a protobuf identifier, as a gRPC method
// name is: a letter or '_', then letters, digits and '_'. A name that is
// not one (a tab pasted after it, a dash) matches no call: refused.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// fullName reports whether s is a protobuf full name, as a gRPC service's
// is: identifiers joined by '.'.
func fullName(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if !identifier(part) {
			return false
		}
	}
	return true
}
