package bulkhead_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

func TestInvalidOptionsAreErrorsThatNameThem(t *testing.T) {
	adaptive := func(min, max, initial int) bulkhead.Option {
		return bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MinLimit: min, MaxLimit: max, InitialLimit: initial}
		}))
	}
	tests := []struct {
		name   string
		opts   []bulkhead.Option
		option string
		msg    string
	}{
		{name: "max concurrent zero", opts: []bulkhead.Option{bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 0 }))}, option: "maxConcurrentCalls", msg: "maxConcurrentCalls: must be at least 1, got 0"},
		{name: "max concurrent negative", opts: []bulkhead.Option{bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = -3 }))}, option: "maxConcurrentCalls", msg: "got -3"},
		{name: "max wait negative", opts: []bulkhead.Option{bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxWaitDuration = -time.Second }))}, option: "maxWaitDuration", msg: "maxWaitDuration: must not be negative (0 rejects at once when full), got -1s"},
		{name: "min limit negative", opts: []bulkhead.Option{adaptive(-1, 0, 0)}, option: "adaptive.minLimit", msg: "adaptive.minLimit: must be at least 1 (or 0 for the default), got -1"},
		{name: "max limit negative", opts: []bulkhead.Option{adaptive(0, -5, 0)}, option: "adaptive.maxLimit", msg: "got -5"},
		{name: "initial limit negative", opts: []bulkhead.Option{adaptive(0, 0, -2)}, option: "adaptive.initialLimit", msg: "got -2"},
		{name: "min above max", opts: []bulkhead.Option{adaptive(20, 10, 0)}, option: "adaptive.minLimit", msg: "adaptive.minLimit: must not exceed adaptive.maxLimit (10), got 20"},
		{name: "min above the default max", opts: []bulkhead.Option{adaptive(300, 0, 0)}, option: "adaptive.minLimit", msg: "must not exceed adaptive.maxLimit (200), got 300"},
		{name: "initial above max", opts: []bulkhead.Option{adaptive(1, 10, 20)}, option: "adaptive.initialLimit", msg: "adaptive.initialLimit: must be within [adaptive.minLimit, adaptive.maxLimit] = [1, 10], got 20"},
		{name: "initial below min", opts: []bulkhead.Option{adaptive(5, 10, 2)}, option: "adaptive.initialLimit", msg: "= [5, 10], got 2"},
		{name: "nil clock", opts: []bulkhead.Option{bulkhead.WithClock(nil)}, option: "clock", msg: "clock: must not be nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := bulkhead.New(tt.opts...)
			if err == nil || b != nil {
				t.Fatalf("New = %v, %v; want an error", b, err)
			}
			var oe *resilience.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option {
				t.Fatalf("error %q does not name option %q", err, tt.option)
			}
			if !errors.Is(err, resilience.ErrInvalidOption) {
				t.Fatalf("error %q is not ErrInvalidOption", err)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "bulkhead: ") {
				t.Fatalf("error %q, want it to start with \"bulkhead: \" and contain %q", err, tt.msg)
			}
		})
	}
}

func TestAllInvalidOptionsAreReportedTogether(t *testing.T) {
	_, err := bulkhead.New(
		bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			c.MaxConcurrentCalls = 0
			c.MaxWaitDuration = -1
			c.Adaptive = true
			c.AdaptiveLimits = bulkhead.Adaptive{MinLimit: -1}
		})),
		bulkhead.WithClock(nil),
	)
	for _, key := range []string{"maxConcurrentCalls", "maxWaitDuration", "adaptive.minLimit", "clock"} {
		if err == nil || !strings.Contains(err.Error(), key+":") {
			t.Errorf("error %q does not mention %s", err, key)
		}
	}
}

func TestNilOptionsAreSkipped(t *testing.T) {
	b := mustNew(t, nil, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 2 })), nil)
	if b.Limit() != 2 {
		t.Fatalf("Limit = %d, want 2", b.Limit())
	}
}

func TestAnOptionCanBeSharedByBulkheads(t *testing.T) {
	opt := bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MaxLimit: 8} }))
	a, b := mustNew(t, opt), mustNew(t, opt)
	if a.Limit() != 8 || b.Limit() != 8 {
		t.Fatalf("limits %d, %d; want 8, 8", a.Limit(), b.Limit())
	}
}
