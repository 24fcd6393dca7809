package ratelimiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

func TestInvalidOptionsAreErrorsThatNameThem(t *testing.T) {
	tests := []struct {
		name   string
		opts   []ratelimiter.Option
		option string
		msg    string
	}{
		{name: "limit zero", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.LimitForPeriod = 0 }))}, option: "limitForPeriod", msg: "limitForPeriod: must be at least 1, got 0"},
		{name: "limit negative", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.LimitForPeriod = -3 }))}, option: "limitForPeriod", msg: "got -3"},
		{name: "period zero", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.LimitRefreshPeriod = 0 }))}, option: "limitRefreshPeriod", msg: "limitRefreshPeriod: must be positive, got 0s"},
		{name: "period negative", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.LimitRefreshPeriod = -time.Second }))}, option: "limitRefreshPeriod", msg: "got -1s"},
		{name: "timeout negative", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.TimeoutDuration = -time.Millisecond }))}, option: "timeoutDuration", msg: "timeoutDuration: must not be negative (0 rejects at once when the limit is reached), got -1ms"},
		{name: "smooth period shorter than a nanosecond a permit", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitForPeriod = 10
			c.LimitRefreshPeriod = 5
		}))}, option: "limitRefreshPeriod", msg: "must be at least limitForPeriod (10) nanoseconds for a smooth limiter, one nanosecond a permit, got 5ns"},
		{name: "unknown mode", opts: []ratelimiter.Option{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.Mode = 7 }))}, option: "mode", msg: "mode: must be bursty or smooth, got Mode(7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimiter.New(tt.opts...)
			if err == nil || l != nil {
				t.Fatalf("New = %v, %v; want an error", l, err)
			}
			var oe *resilience.OptionError
			if !errors.As(err, &oe) || oe.Option != tt.option {
				t.Fatalf("error %q does not name option %q", err, tt.option)
			}
			if !errors.Is(err, resilience.ErrInvalidOption) {
				t.Fatalf("error %q is not ErrInvalidOption", err)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.HasPrefix(err.Error(), "ratelimiter: ") {
				t.Fatalf("error %q, want it to start with \"ratelimiter: \" and contain %q", err, tt.msg)
			}
		})
	}
}

func TestAllInvalidOptionsAreReportedTogether(t *testing.T) {
	_, err := ratelimiter.New(
		ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 0
			c.LimitRefreshPeriod = -1
			c.TimeoutDuration = -1
			c.Mode = 9
		})),
	)
	for _, key := range []string{"limitForPeriod", "limitRefreshPeriod", "timeoutDuration", "mode"} {
		if !strings.Contains(err.Error(), key+":") {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
}

func TestValidEdgeOptions(t *testing.T) {
	for _, opts := range [][]ratelimiter.Option{
		{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.LimitForPeriod = 1
			c.LimitRefreshPeriod = time.Nanosecond
		}))},
		{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
			c.Mode = ratelimiter.Smooth
			c.LimitForPeriod = 10
			c.LimitRefreshPeriod = 10
		}))},
		{ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) { c.TimeoutDuration = 0 })), nil},
	} {
		mustNew(t, opts...)
	}
}
