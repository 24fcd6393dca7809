package otelmw

import "github.com/meshless/meshless/resilience"

// DefaultMaxMethodValues is the number of distinct rpc.method values an
// [Observer] records before it folds further methods into "_OTHER".
const DefaultMaxMethodValues = 1000

// maxErrorTypes bounds the distinct error.type values of one method's
// meshless.call.duration; further values become "_OTHER". gRPC has 17 codes
// and grpcmw adds circuit_open, throttled and bulkhead_full.
const maxErrorTypes = 32

type config struct {
	maxMethods int
	withMethod bool
	spanEvents bool
}

func defaultConfig() config {
	return config{
		maxMethods: DefaultMaxMethodValues,
		withMethod: true,
		spanEvents: true,
	}
}

func (c *config) validate() error {
	if c.maxMethods < 1 {
		return &resilience.OptionError{Option: "WithMaxMethodValues", Value: c.maxMethods, Problem: "must be at least 1"}
	}
	return nil
}

// Option configures an [Observer].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMaxMethodValues bounds the distinct values of the rpc.method attribute:
// the first n method names an Observer sees are recorded as they are, every
// later one as "_OTHER" (as OpenTelemetry's RPC conventions name an
// unrecognised method). n must be at least 1. Default [DefaultMaxMethodValues].
func WithMaxMethodValues(n int) Option {
	return optionFunc(func(c *config) { c.maxMethods = n })
}

// WithoutMethod drops the rpc.method attribute from every metric (retry,
// timeout and call metrics are then one series per outcome for the whole
// client). Default: rpc.method is recorded, bounded by [WithMaxMethodValues].
func WithoutMethod() Option {
	return optionFunc(func(c *config) { c.withMethod = false })
}

// WithoutSpanEvents stops the Observer from adding events to the caller's
// span for retries and rejections. Default: span events are added when the
// call's context carries a recording span.
func WithoutSpanEvents() Option {
	return optionFunc(func(c *config) { c.spanEvents = false })
}
