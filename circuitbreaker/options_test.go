package circuitbreaker_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

func TestInvalidOptionsAreErrorsThatNameThem(t *testing.T) {
	tests := []struct {
		name   string
		opts   []circuitbreaker.Option
		option string
		msg    string
	}{
		{"window size zero", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.SlidingWindowSize = 0 }))}, "slidingWindowSize", "slidingWindowSize: must be in [1, 1048576] calls for COUNT_BASED, got 0"},
		{"window size negative", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.SlidingWindowSize = -5 }))}, "slidingWindowSize", "got -5"},
		{"time window too long", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowType = circuitbreaker.TimeBased
			c.SlidingWindowSize = 7200
		}))}, "slidingWindowSize", "seconds for TIME_BASED, got 7200"},
		{"window type unknown", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.SlidingWindowType = 7 }))}, "slidingWindowType", "got WindowType(7)"},
		{"minimum zero", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.MinimumNumberOfCalls = 0 }))}, "minimumNumberOfCalls", "must be at least 1, got 0"},
		{"minimum above a count window", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowSize = 10
			c.MinimumNumberOfCalls = 20
		}))}, "minimumNumberOfCalls", "must not exceed slidingWindowSize (10)"},
		{"failure rate zero", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.FailureRateThreshold = 0 }))}, "failureRateThreshold", "must be in (0, 100], got 0"},
		{"failure rate above 100", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.FailureRateThreshold = 150 }))}, "failureRateThreshold", "failureRateThreshold: must be in (0, 100], got 150"},
		{"failure rate NaN", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.FailureRateThreshold = math.NaN() }))}, "failureRateThreshold", "got NaN"},
		{"slow rate negative", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.SlowCallRateThreshold = -1 }))}, "slowCallRateThreshold", "got -1"},
		{"slow duration zero", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.SlowCallDurationThreshold = 0 }))}, "slowCallDurationThreshold", "must be positive, got 0s"},
		{"open wait negative", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.WaitDurationInOpenState = -time.Second }))}, "waitDurationInOpenState", "got -1s"},
		{"max open wait below the wait", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.MaxWaitDurationInOpenState = time.Second }))}, "maxWaitDurationInOpenState", "at least waitDurationInOpenState (30s), got 1s"},
		{"jitter of 1", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.OpenStateJitter = 1 }))}, "openStateJitter", "must be in [0, 1)"},
		{"no probes", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.PermittedNumberOfCallsInHalfOpenState = 0 }))}, "permittedNumberOfCallsInHalfOpenState", "must be at least 1, got 0"},
		{"half-open wait negative", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.MaxWaitDurationInHalfOpenState = -time.Second }))}, "maxWaitDurationInHalfOpenState", "must not be negative"},
		{"mode unknown", []circuitbreaker.Option{circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.Mode = 9 }))}, "mode", "got Mode(9)"},
		{"nil clock", []circuitbreaker.Option{circuitbreaker.WithClock(nil)}, "clock", "must not be nil"},
		{"nil classifier", []circuitbreaker.Option{circuitbreaker.WithClassifier(nil)}, "classifier", "must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb, err := circuitbreaker.New(tt.opts...)
			if err == nil || cb != nil {
				t.Fatalf("New = %v, %v; want an error", cb, err)
			}
			var oe *resilience.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option {
				t.Fatalf("error %q does not name option %q", err, tt.option)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "circuitbreaker: ") {
				t.Fatalf("error %q, want it to contain %q", err, tt.msg)
			}
		})
	}
}

func TestAllInvalidOptionsAreReportedTogether(t *testing.T) {
	_, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.FailureRateThreshold = 0
		c.SlidingWindowSize = 0
	})))
	for _, key := range []string{"failureRateThreshold", "slidingWindowSize"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not mention %s", err, key)
		}
	}
}

func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	// docs/configuration.md: window 100, minimum 20, failure 50 %, slow 2s at 100 %,
	// open 30s, 2 probes.
	h := newHarness(t)
	h.calls(19, fail, 0)
	h.wantState(circuitbreaker.StateClosed) // below the minimum of 20
	h.calls(1, fail, 0)
	h.wantState(circuitbreaker.StateOpen)
	h.clk.Advance(30*time.Second - 1)
	h.wantState(circuitbreaker.StateOpen)
	h.clk.Advance(1)
	h.calls(1, ok, 2*time.Second) // exactly 2s is not slow
	h.wantState(circuitbreaker.StateHalfOpen)
	h.calls(1, ok, 0)
	h.wantState(circuitbreaker.StateClosed)
}

func TestParseNames(t *testing.T) {
	for _, s := range []string{"COUNT_BASED", "time_based"} {
		wt, err := circuitbreaker.ParseWindowType(s)
		if err != nil || !strings.EqualFold(wt.String(), s) {
			t.Errorf("ParseWindowType(%q) = %v, %v", s, wt, err)
		}
	}
	if _, err := circuitbreaker.ParseWindowType("SLIDING"); err == nil || !strings.Contains(err.Error(), `slidingWindowType: must be COUNT_BASED or TIME_BASED, got "SLIDING"`) {
		t.Errorf("ParseWindowType(SLIDING) error = %v", err)
	}
	for _, s := range []string{"NORMAL", "disabled", "Metrics_Only", "FORCED_OPEN"} {
		m, err := circuitbreaker.ParseMode(s)
		if err != nil || !strings.EqualFold(m.String(), s) {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := circuitbreaker.ParseMode("OFF"); err == nil || !strings.Contains(err.Error(), "mode:") {
		t.Errorf("ParseMode(OFF) error = %v", err)
	}
}

func TestStateAndReasonNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{circuitbreaker.StateHalfOpen.String(), "HALF_OPEN"},
		{circuitbreaker.StateMetricsOnly.String(), "METRICS_ONLY"},
		{circuitbreaker.State(77).String(), "State(77)"},
		{circuitbreaker.ReasonSlowCallRate.String(), "slow_call_rate"},
		{circuitbreaker.Reason(99).String(), "Reason(99)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
