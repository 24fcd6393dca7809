package deadletter

import (
	"log/slog"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// Events a [Listener] hears for a key's entries, one name each.
const (
	EventDeferred = "deferred" // kept: the caller got a DeferredError
	EventRefused  = "refused"  // not kept (the key was full, or the store failed): the caller got its original error
	EventReplayed = "replayed" // replayed with success and removed
	EventFailed   = "failed"   // a replay failed; the entry stays, its failed replays counted
	EventParked   = "parked"   // set aside after MaxReplays failed replays
	EventExpired  = "expired"  // older than MaxAge: removed without a replay
	EventDropped  = "dropped"  // the store could not decode it: removed
	EventRequeued = "requeued" // an operator moved a parked entry back to waiting
	EventPurged   = "purged"   // an operator deleted a parked entry
)

// Listener hears what a queue does with its entries, for metrics (otelmw's
// DeadLetterListener records the meshless.deadletter.* metrics). Its
// methods are called from the queue's goroutines and callers' goroutines,
// concurrently, and must not block.
type Listener interface {
	// Entries reports that n of key's entries went through event (one of
	// the Event constants).
	Entries(key, event string, n int)
	// Watch hands the listener a reading of key's gauges: entries waiting
	// and parked, and the age of the oldest waiting entry. read is cheap
	// (it returns the queue's last figures, refreshed after each replay
	// round and each deferral) and may be called from any goroutine until
	// the returned function is called, when the queue closes.
	Watch(key string, read func() (waiting, parked int64, oldest time.Duration)) (unwatch func())
}

// Bounds of the options.
const (
	DefaultInterval = 10 * time.Second
	MinInterval     = 10 * time.Millisecond
	maxOwnerBytes   = 64
)

type options struct {
	clock    resilience.Clock
	logger   *slog.Logger
	listener Listener
	interval time.Duration
	owner    string
}

// Option configures a [Queue].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock sets the clock that stamps entries, ages them, paces replays
// and times rounds. Default [resilience.SystemClock]. A replay's own
// deadline (Config.ReplayTimeout) is a context deadline, in real time.
func WithClock(c resilience.Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithLogger sets where the queue logs store errors (at most one a second
// per queue) and replays that panicked. Default [slog.Default].
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithListener sets the listener of entry events and gauges. Default none.
func WithListener(l Listener) Option { return optionFunc(func(o *options) { o.listener = l }) }

// WithInterval sets how often each key gets a replay round when nothing
// kicks it ([Queue.Kick]): the fallback that replays entries another
// instance deferred, and entries whose breaker closed unseen. Default
// [DefaultInterval]; at least [MinInterval].
func WithInterval(d time.Duration) Option { return optionFunc(func(o *options) { o.interval = d }) }

// WithOwner names the queue as a lease holder (and Redis consumer): unique
// among the instances that share a store, printable ASCII without spaces,
// at most 64 bytes. Default: random.
func WithOwner(id string) Option { return optionFunc(func(o *options) { o.owner = id }) }

func (o *options) validate() error {
	var errs opterr.Errors
	if o.clock == nil {
		errs.Add("clock", nil, "must not be nil")
	}
	if o.interval < MinInterval {
		errs.Add("interval", o.interval, "must be at least "+MinInterval.String())
	}
	if o.owner == "" || len(o.owner) > maxOwnerBytes || !isToken(o.owner) {
		errs.Add("owner", o.owner, "must be 1 to 64 printable ASCII characters without spaces")
	}
	return errs.Err()
}
