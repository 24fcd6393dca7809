package grpcmw

import (
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
)

type options struct {
	observer        resilience.Observer
	outlierListener outlier.Listener
	clock           resilience.Clock
	maxMethods      int
	serverSide      bool // NewServer: bulkheads only
}

func defaultOptions() options {
	return options{clock: resilience.SystemClock(), maxMethods: 10000}
}

// Option configures a [Chain].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver sends every policy's events to obs. Default none.
func WithObserver(obs resilience.Observer) Option {
	return optionFunc(func(o *options) { o.observer = obs })
}

// WithClock sets the clock of the breakers, bulkheads and retry backoffs.
// Default [resilience.SystemClock]: a gRPC call takes tens of microseconds,
// so reading time.Now a few times per call costs little, while
// [resilience.CoarseClock] keeps a ticker goroutine waking every millisecond
// while calls flow, which measurably adds to gRPC latency (docs/benchmarks.md,
// B5), and lags the real time under CPU load.
func WithClock(clk resilience.Clock) Option { return optionFunc(func(o *options) { o.clock = clk }) }

// WithOutlierListener sends the outlier balancer's ejections and returns to
// l as well. The chain's observer ([WithObserver]) receives them anyway, as
// resilience.EventEjected and EventReturned events of a KindOutlier source,
// and otelmw's Observer records them as the meshless.outlier.* metrics: do
// not also pass otelmw.NewOutlierListener here, or each ejection is counted
// twice. Default none.
func WithOutlierListener(l outlier.Listener) Option {
	return optionFunc(func(o *options) { o.outlierListener = l })
}

// WithMaxMethods bounds the methods the chain keeps policies for. A method
// beyond the bound runs without policies. Default 10000.
func WithMaxMethods(n int) Option { return optionFunc(func(o *options) { o.maxMethods = n }) }
