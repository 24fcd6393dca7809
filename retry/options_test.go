package retry_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

func TestInvalidOptionsAreErrorsThatNameThem(t *testing.T) {
	tests := []struct {
		name   string
		opt    retry.Option
		option string
		msg    string
	}{
		{"no attempts", retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 0 })), "maxAttempts", "maxAttempts: must be in [1, 100] (it counts the first call), got 0"},
		{"too many attempts", retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxAttempts = 1000 })), "maxAttempts", "got 1000"},
		{"initial zero", retry.WithConfig(retryConf(func(c *retry.Config) { c.InitialBackoff = 0 })), "initialBackoff", "initialBackoff: must be positive, got 0s"},
		{"max negative", retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxBackoff = -time.Second })), "maxBackoff", "must be positive, got -1s"},
		{"max below initial", retry.WithConfig(retryConf(func(c *retry.Config) { c.MaxBackoff = 50 * time.Millisecond })), "maxBackoff", "must be at least initialBackoff (100ms), got 50ms"},
		{"multiplier below 1", retry.WithConfig(retryConf(func(c *retry.Config) { c.BackoffMultiplier = 0.5 })), "backoffMultiplier", "must be at least 1, got 0.5"},
		{"multiplier NaN", retry.WithConfig(retryConf(func(c *retry.Config) { c.BackoffMultiplier = math.NaN() })), "backoffMultiplier", "got NaN"},
		{"jitter 1", retry.WithConfig(retryConf(func(c *retry.Config) { c.Jitter = 1 })), "jitter", "jitter: must be in [0, 1), got 1"},
		{"nil predicate", retry.WithRetryable(nil), "retryable", "must not be nil"},
		{"nil classifier", retry.WithClassifier(nil), "classifier", "must not be nil"},
		{"nil clock", retry.WithClock(nil), "clock", "must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := retry.New(tt.opt)
			var oe *resilience.OptionError
			if r != nil || !errors.As(err, &oe) || oe.Option != tt.option {
				t.Fatalf("New = %v, %v; want an error naming %s", r, err, tt.option)
			}
			if !strings.HasPrefix(err.Error(), "retry: ") || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q, want it to contain %q", err, tt.msg)
			}
		})
	}
	for _, tt := range []struct {
		max, ratio float64
		msg        string
	}{
		{0, 0.1, "retry: retryThrottling: maxTokens: must be in (0, 1000], got 0"},
		{2000, 0.1, "maxTokens: must be in (0, 1000], got 2000"},
		{10, 0, "tokenRatio: must be at least 0.001 and at most maxTokens, got 0"},
		{10, 11, "tokenRatio: must be at least 0.001 and at most maxTokens, got 11"},
	} {
		if _, err := retry.NewThrottle(tt.max, tt.ratio); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("NewThrottle(%v, %v) = %v, want %q", tt.max, tt.ratio, err, tt.msg)
		}
	}
	if _, err := retry.NewThrottle(0, 0.1); strings.Contains(err.Error(), "tokenRatio") {
		t.Errorf("a bad maxTokens also blames tokenRatio: %v", err)
	}
}

func TestReasonNames(t *testing.T) {
	if got := retry.ReasonThrottled.String(); got != "throttled" {
		t.Errorf("ReasonThrottled = %q", got)
	}
	if got := retry.Reason(99).String(); got != "Reason(99)" {
		t.Errorf("Reason(99) = %q", got)
	}
}
