package retry

import (
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// MaxHedgedAttempts is the most copies a hedged call may send, the first
// included: gRFC A6 caps hedgingPolicy.maxAttempts at 5.
const MaxHedgedAttempts = 5

// HedgeConfig is a hedging policy's settings, named after gRPC's
// hedgingPolicy keys (see docs/hedging.md). Start from
// [DefaultHedgeConfig]. A HedgeConfig is a plain comparable value.
type HedgeConfig struct {
	Name string
	// MaxAttempts is the most copies of a call, the first included, in
	// [2, MaxHedgedAttempts].
	MaxAttempts int
	// HedgingDelay is the time after which the next copy is sent while no
	// answer has won; 0 sends every copy at once.
	HedgingDelay time.Duration
}

// DefaultHedgeConfig returns the defaults of docs/hedging.md: 3 copies,
// 100ms apart.
func DefaultHedgeConfig() HedgeConfig {
	return HedgeConfig{MaxAttempts: 3, HedgingDelay: 100 * time.Millisecond}
}

// Validate reports every invalid setting, each error naming its key
// (errors.Is [resilience.ErrInvalidOption]).
func (c HedgeConfig) Validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	return errs.Err()
}

func (c *HedgeConfig) check(bad func(option string, value any, problem string)) {
	if c.MaxAttempts < 2 || c.MaxAttempts > MaxHedgedAttempts {
		bad("maxAttempts", c.MaxAttempts, "must be in [2, 5] (it counts the first call; gRFC A6 allows at most 5)")
	}
	if c.HedgingDelay < 0 {
		bad("hedgingDelay", c.HedgingDelay, "must not be negative (0 sends every copy at once)")
	}
}

type hedgeConfig struct {
	HedgeConfig
	nonFatal func(error) bool
	pushback func(error) (time.Duration, bool)
	throttle *Throttle
	clock    resilience.Clock
	observer resilience.Observer
	observe  bool
}

func (c *hedgeConfig) validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	if c.clock == nil {
		errs.Add("clock", nil, "must not be nil")
	}
	if c.nonFatal == nil {
		errs.Add("nonFatal", nil, "must not be nil")
	}
	return errs.Err()
}

// HedgeOption configures a [Hedge].
type HedgeOption interface{ applyHedge(*hedgeConfig) }

type hedgeOptionFunc func(*hedgeConfig)

func (f hedgeOptionFunc) applyHedge(c *hedgeConfig) { f(c) }

// WithHedgeConfig sets the policy's settings, every one of them (the name
// included: a [WithHedgeName] after it renames the policy). Start c from
// [DefaultHedgeConfig]. Without it a policy has [DefaultHedgeConfig]'s
// settings.
func WithHedgeConfig(c HedgeConfig) HedgeOption {
	return hedgeOptionFunc(func(cfg *hedgeConfig) { cfg.HedgeConfig = c })
}

// WithHedgeName names the policy for observers (grpcmw uses the method).
func WithHedgeName(name string) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.Name = name })
}

// WithNonFatal sets which errors are non-fatal (gRPC's
// nonFatalStatusCodes): a copy that fails with one does not end the call,
// and the next copy goes at once. Any other error is a fatal answer that
// wins like a success. Default: no error is non-fatal. A
// [resilience.Rejection] is never taken for an answer, whatever f says.
func WithNonFatal(f func(err error) bool) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.nonFatal = f })
}

// WithHedgePushback sets how to read a server's pushback from a copy's
// error (gRFC A6): ok is false when there is none; a delay sends the next
// copy after it instead of at once; a negative delay sends no more copies,
// and so does one longer than 300s or past the call's deadline (not
// waited: the copies in flight decide the call). Default: none.
func WithHedgePushback(f func(err error) (delay time.Duration, ok bool)) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.pushback = f })
}

// WithHedgeThrottle shares a client's retry throttle with the policy
// (gRFC A6): hedged copies go only while more than half its tokens are
// left; a non-fatal failure takes a token and a success gives some back.
// The first copy always goes. Default: none.
func WithHedgeThrottle(t *Throttle) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.throttle = t })
}

// WithHedgeClock sets the clock the hedging delays run on. Default: the
// system clock.
func WithHedgeClock(clk resilience.Clock) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.clock = clk })
}

// WithHedgeObserver sets the observer of the policy's events
// ([resilience.EventHedge] per copy after the first,
// [resilience.EventHedgeDone] per call). Default none.
func WithHedgeObserver(o resilience.Observer) HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.observer = o })
}

// WithHedgeObserve makes the policy observe only (observe mode): it sends
// the first copy only, and reports the copy it decides to send next
// (resilience.EventHedge: no answer within hedgingDelay, or a non-fatal
// failure) instead of sending it; the first copy's answer is the call's.
// Run it with an observed context (resilience.Observe) so that observers
// tell the reported copy apart. Default off.
func WithHedgeObserve() HedgeOption {
	return hedgeOptionFunc(func(c *hedgeConfig) { c.observe = true })
}
