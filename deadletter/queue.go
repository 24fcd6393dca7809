package deadletter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Handler replays one entry of its key: it makes the call the entry
// describes, through the same policies as a live call, and returns its
// error. ctx carries the entry's ID ([ReplayID]) and the replay's deadline
// (Config.ReplayTimeout). A nil error removes the entry; a
// [resilience.Rejection] (the breaker opened again) stops the round and
// leaves the entry as it was; any other error counts a failed replay.
type Handler func(ctx context.Context, e Entry) error

// Queue defers calls into a [Store] and replays them, key by key, oldest
// first. Each key has a [Handler] ([Queue.Handle]) and a goroutine that runs
// replay rounds: at once when the key is handled (entries left by a
// previous run), when [Queue.Kick] says its breaker closed, and every
// interval otherwise ([WithInterval]).
//
// A Queue is safe for concurrent use. It does not own its store: close the
// queue, then the store.
type Queue struct {
	store    Store
	cfg      Config
	lim      Limits
	clock    resilience.Clock
	logger   *slog.Logger
	listener Listener
	interval time.Duration
	owner    string
	period   time.Duration // between two replays of one key
	leaseTTL time.Duration

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex
	keys   map[string]*keyState
	closed bool
	ended  chan struct{} // closed when the first Close has returned its goroutines

	lastLog atomic.Int64 // clock time (UnixNano) of the last store error logged
}

// keyState is one handled key.
type keyState struct {
	key     string
	fn      Handler
	kick    chan struct{} // capacity 1: a kick during a round makes one more round
	unwatch func()

	// Gauges, read by the listener at any time; written through book.
	waiting, parked atomic.Int64
	oldest          atomic.Int64 // UnixNano of the oldest waiting entry; 0: none
	book            gaugeBook

	nextAt time.Time // earliest start of the next replay; the key's goroutine only
}

// New returns a queue over store with the settings of cfg (zero fields are
// defaults). An invalid setting or option is an error naming it.
func New(store Store, cfg Config, opts ...Option) (*Queue, error) {
	o := options{clock: resilience.SystemClock(), interval: DefaultInterval, owner: NewID()}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := errors.Join(cfg.Validate(), o.validate()); err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	if store == nil {
		return nil, fmt.Errorf("deadletter: %w", &resilience.OptionError{Option: "store", Value: nil, Problem: "must not be nil"})
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	cfg = cfg.withDefaults()
	period := time.Duration(float64(time.Second) / cfg.ReplayRate)
	q := &Queue{
		store: store, cfg: cfg, lim: cfg.Limits(),
		clock: o.clock, logger: o.logger, listener: o.listener, interval: o.interval, owner: o.owner,
		period:   period,
		leaseTTL: period + cfg.ReplayTimeout + 10*time.Second,
		keys:     map[string]*keyState{},
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.ended = make(chan struct{})
	return q, nil
}

// Config returns the queue's settings, defaults filled in.
func (q *Queue) Config() Config { return q.cfg }

// Handle registers how key's entries are replayed and starts the key's
// rounds, the first one at once (it replays what a previous run left). A
// key has one handler; calling Handle again for it is an error.
func (q *Queue) Handle(key string, fn Handler) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("deadletter: key %q: the handler must not be nil", key)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if _, ok := q.keys[key]; ok {
		return fmt.Errorf("deadletter: key %q already has a handler", key)
	}
	ks := &keyState{key: key, fn: fn, kick: make(chan struct{}, 1)}
	if q.listener != nil {
		// Before the key is registered: a Watch that panics leaves no key
		// without its rounds behind (Handle passes the panic on).
		ks.unwatch = q.listener.Watch(key, q.reader(ks))
	}
	q.keys[key] = ks
	q.wg.Add(1)
	go q.run(ks)
	return nil
}

// reader returns the gauges' reading of ks.
func (q *Queue) reader(ks *keyState) func() (int64, int64, time.Duration) {
	return func() (int64, int64, time.Duration) {
		var age time.Duration
		if o := ks.oldest.Load(); o != 0 {
			age = max(0, q.clock.Now().Sub(time.Unix(0, o)))
		}
		return ks.waiting.Load(), ks.parked.Load(), age
	}
}

func (q *Queue) key(key string) *keyState {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.keys[key]
}

// Defer keeps e, to be replayed later by its key's handler, and returns the
// error the caller should return: a [*DeferredError] (errors.Is
// [ErrDeferred]) carrying cause when e is kept, durably; cause itself when
// it is not (the key is full, the store failed, the queue is closed, no
// handler replays the key), which is counted ([EventRefused]) and logged.
// cause is the rejection or failure that made the call defer; a caller
// passes it unchanged, so that a call that could not be kept fails as it
// would have without the queue.
//
// Defer sets e.ID when it is empty, stamps e.Enqueued, and keeps only the
// metadata keys that Config.Metadata allows. It waits for the store (a
// file sync, a Redis round trip) within ctx.
//
// A replay is never deferred again: when ctx is a replay's ([ReplayID]),
// Defer returns cause at once and counts nothing, since the replayed entry
// is still kept.
func (q *Queue) Defer(ctx context.Context, e Entry, cause error) error {
	if _, ok := ReplayID(ctx); ok {
		if cause == nil {
			return fmt.Errorf("deadletter: key %q: a replay is not deferred again", e.Key)
		}
		return cause
	}
	ks := q.key(e.Key)
	if ks == nil {
		return q.refuse(e.Key, cause, ErrNoHandler)
	}
	if q.ctx.Err() != nil {
		return q.refuse(e.Key, cause, ErrClosed)
	}
	if e.ID == "" {
		e.ID = NewID()
	}
	e.Enqueued = q.clock.Now()
	e.Replays, e.Pos = 0, ""
	e.Metadata = q.cfg.Metadata.Filter(e.Metadata)
	if err := q.append(ctx, e); err != nil {
		return q.refuse(e.Key, cause, err)
	}
	q.emit(e.Key, EventDeferred, 1)
	ks.added(e.Enqueued.UnixNano())
	return &DeferredError{Key: e.Key, ID: e.ID, Cause: cause}
}

// appendTimeout bounds the store's write of a deferral.
const appendTimeout = time.Second

// append writes e to the store under ctx's values but not its end: a call
// is deferred just when its caller's context may have ended (its deadline
// passed in its last attempt, or it was cancelled while CANCELLED counts as
// a failure), and the entry must be kept all the same, in every store (a
// bbolt file takes no context; Redis's client refuses an ended one). The
// write has appendTimeout of its own instead.
func (q *Queue) append(ctx context.Context, e Entry) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	return q.store.Append(ctx, e, q.lim)
}

// refuse counts and logs an entry not kept and returns what the caller
// returns: cause, or err when there is no cause.
func (q *Queue) refuse(key string, cause, err error) error {
	q.emit(key, EventRefused, 1)
	if !errors.Is(err, ErrFull) {
		q.logStoreError("an entry was not kept; the caller gets its original error", key, err)
	}
	if cause == nil {
		return fmt.Errorf("deadletter: key %q: not kept: %w", key, err)
	}
	return cause
}

func (q *Queue) emit(key, event string, n int) {
	if q.listener != nil && n > 0 {
		q.listener.Entries(key, event, n)
	}
}

// logStoreError logs err at most once a second.
func (q *Queue) logStoreError(msg, key string, err error) {
	now := q.clock.Now().UnixNano()
	last := q.lastLog.Load()
	if last != 0 && now-last < int64(time.Second) || !q.lastLog.CompareAndSwap(last, now) {
		return
	}
	q.logger.Warn("meshless deadletter: "+msg, "key", key, "error", err)
}

// Kick starts a replay round for key soon, if none is running: the engine
// calls it when the key's circuit breaker closes. A key without a handler
// is ignored. Kick never blocks.
func (q *Queue) Kick(key string) {
	if ks := q.key(key); ks != nil {
		select {
		case ks.kick <- struct{}{}:
		default:
		}
	}
}

// Pending returns the entries of key waiting for a replay, as last read
// (refreshed after each round and each deferral; other instances' deferrals
// to a shared store show after the next round): a cheap test before
// [Queue.Kick]. A deferral that races a round's read of the store counts
// as waiting: Pending can be one too high until the next round, never
// zero while this queue's deferral waits.
func (q *Queue) Pending(key string) int64 {
	if ks := q.key(key); ks != nil {
		return ks.waiting.Load()
	}
	return 0
}

// Close stops every round (a replay in flight sees its context cancelled and
// its entry stays, not counted) and waits for the goroutines to end. It does
// not close the store. Defer after Close refuses. A Close while another runs
// waits for it: once any Close has returned, the store can be closed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.ended
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	defer close(q.ended)
	q.cancel()
	q.wg.Wait()
	q.mu.RLock()
	defer q.mu.RUnlock()
	for _, ks := range q.keys {
		if ks.unwatch != nil {
			ks.unwatch()
		}
	}
	return nil
}
