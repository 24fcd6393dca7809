package ratelimiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

func TestConfigValidateNamesEachKey(t *testing.T) {
	if err := ratelimiter.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	err := ratelimiter.Config{LimitForPeriod: 0, LimitRefreshPeriod: -time.Second, TimeoutDuration: -1}.Validate()
	if !errors.Is(err, resilience.ErrInvalidOption) {
		t.Fatalf("want ErrInvalidOption, got %v", err)
	}
	for _, key := range []string{"limitForPeriod", "limitRefreshPeriod", "timeoutDuration"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
}

func TestWithConfigSetsEverySetting(t *testing.T) {
	c := ratelimiter.Config{Name: "q", LimitForPeriod: 7, LimitRefreshPeriod: 2 * time.Second, TimeoutDuration: time.Millisecond, Mode: ratelimiter.Smooth}
	l, err := ratelimiter.New(ratelimiter.WithConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	if l.Name() != "q" || l.LimitForPeriod() != 7 || l.LimitRefreshPeriod() != 2*time.Second || l.TimeoutDuration() != time.Millisecond || l.Mode() != ratelimiter.Smooth {
		t.Fatalf("got %s %d %v %v %v", l.Name(), l.LimitForPeriod(), l.LimitRefreshPeriod(), l.TimeoutDuration(), l.Mode())
	}
}
