package grpcmw

import (
	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
)

type options struct {
	observer        resilience.Observer
	redis           redis.UniversalClient
	clusterListener cluster.Listener
	// deadLetterListener hears the dead-letter queues' events.
	deadLetterListener deadletter.Listener
	outlierListener    outlier.Listener
	clock              resilience.Clock
	maxMethods         int
	serverSide         bool // NewServer: bulkheads only
	// retryBufferLimit bounds the bytes a stream keeps to replay.
	retryBufferLimit int
}

func defaultOptions() options {
	return options{clock: resilience.SystemClock(), maxMethods: 10000, retryBufferLimit: DefaultRetryBufferLimit}
}

// Option configures a [Chain].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithObserver sends every policy's events to obs. Default none.
func WithObserver(obs resilience.Observer) Option {
	return optionFunc(func(o *options) { o.observer = obs })
}

// WithClock sets the clock of the breakers, bulkheads, adaptive throttlers,
// retry backoffs and hedging delays.
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

// WithRedisClient gives the cluster section a go-redis client built in Go
// (any client: a server, Redis Cluster, Sentinel, or an in-process server
// such as miniredis), used instead of cluster.redis. The client stays the
// caller's: close it after the chain. Default none: the chain dials
// cluster.redis itself, and closes that client in Close.
func WithRedisClient(rdb redis.UniversalClient) Option {
	return optionFunc(func(o *options) { o.redis = rdb })
}

// WithClusterListener hears the cluster's syncs and remote opens
// (otelmw.NewClusterListener records them as metrics). Default none.
func WithClusterListener(l cluster.Listener) Option {
	return optionFunc(func(o *options) { o.clusterListener = l })
}

// WithDeadLetterListener hears the dead-letter queues' events (deferred,
// replayed, parked, expired…; otelmw.NewDeadLetterListener records them as
// the meshless.deadletter.* metrics). Default none.
func WithDeadLetterListener(l deadletter.Listener) Option {
	return optionFunc(func(o *options) { o.deadLetterListener = l })
}

// WithMaxMethods bounds the methods the chain keeps an entry of their own
// for (its resolved policies and metric names). A method beyond the bound
// shares its service's _OTHER entry, or the defaults' when the configuration
// does not name its service, as an unknown method does: it never runs
// without policies. n must be at least 1. Default 10000.
//
// It bounds the chain's state; otelmw.WithMaxMethodValues bounds the
// rpc.method values an observer records.
func WithMaxMethods(n int) Option { return optionFunc(func(o *options) { o.maxMethods = n }) }

// DefaultRetryBufferLimit is the default of [WithRetryBufferLimit]: 256 KiB,
// grpc-go's own per-call retry buffer.
const DefaultRetryBufferLimit = 256 << 10

// WithRetryBufferLimit bounds, in bytes, what one stream of a retrying
// method keeps of the messages it sent, to replay them on a retry (gRFC A6's
// per-RPC buffer limit). Each message counts its encoded size plus the
// 5-byte gRPC frame header; a message that is not a protocol buffer cannot
// be counted and commits the call at once. A message that would take the
// stream past the limit commits it: it is sent, and the stream is retried no
// more. 0 keeps nothing: a stream is then retried only while it has sent
// nothing. Default [DefaultRetryBufferLimit].
func WithRetryBufferLimit(bytes int) Option {
	return optionFunc(func(o *options) { o.retryBufferLimit = bytes })
}
