package httpmw

import (
	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/resilience"
)

type options struct {
	observer        resilience.Observer
	redis           redis.UniversalClient
	clusterListener cluster.Listener
	clock           resilience.Clock
	maxRoutes       int
	serverSide      bool // NewServer: bulkheads and rate limiters only
}

func defaultOptions() options {
	return options{clock: resilience.SystemClock(), maxRoutes: 10000}
}

// Option configures a [Chain].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver sends every policy's events to obs (otelmw.New's Observer
// records them as metrics, an HTTP call's with OpenTelemetry's HTTP
// attributes). Default none.
func WithObserver(obs resilience.Observer) Option {
	return optionFunc(func(o *options) { o.observer = obs })
}

// WithClock sets the clock of the breakers, bulkheads, adaptive throttlers,
// retry backoffs and hedging delays; nil is an error from [New].
// Default [resilience.SystemClock].
func WithClock(clk resilience.Clock) Option { return optionFunc(func(o *options) { o.clock = clk }) }

// WithRedisClient gives the cluster section a go-redis client built in Go,
// used instead of cluster.redis; it stays the caller's to close. Default
// none: the chain dials cluster.redis itself, and closes that client in
// Close.
func WithRedisClient(rdb redis.UniversalClient) Option {
	return optionFunc(func(o *options) { o.redis = rdb })
}

// WithClusterListener hears the cluster's syncs and remote opens. Default
// none.
func WithClusterListener(l cluster.Listener) Option {
	return optionFunc(func(o *options) { o.clusterListener = l })
}

// WithMaxRoutes bounds the routes and hosts the chain keeps policies for.
// Every route and host the configuration names has an entry, and unknown
// hosts share one; past the bound, a route runs with its host's entry.
// Default 10000.
func WithMaxRoutes(n int) Option { return optionFunc(func(o *options) { o.maxRoutes = n }) }
