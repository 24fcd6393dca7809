package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/resilience"
)

// A Deferrable is an [Attempt] whose call can be kept in a dead-letter
// queue: Entry returns what to replay (the method, the encoded request, the
// metadata; the queue keeps only the allowed keys), or false for a call that
// cannot be replayed (a request the transport cannot encode).
type Deferrable interface {
	Entry(ctx context.Context) (deadletter.Entry, bool)
}

// A Replayer is a [Transport] that can make a deferred call again, through
// its own chain, carrying the entry's replay id (deadletter.ReplayID). A
// replay that cannot be made yet (no connection) returns a
// resilience.Rejection: the round stops and nothing is counted.
type Replayer interface {
	Replay(ctx context.Context, e deadletter.Entry) error
}

// deadLetters are an engine's dead-letter queues and their stores, for its
// life (reloads keep a queue whose settings did not change).
type deadLetters struct {
	mu     sync.Mutex
	stores map[string]deadletter.Store // by "local:<path>" or "redis:<namespace>"
	queues map[string]*dlQueue         // by key
	rdbs   []redis.UniversalClient     // clients dialled for a store's own redis section
	closed bool
	// retiring: queues a reload replaced, closing on goroutines of their
	// own (see queueOf).
	retiring sync.WaitGroup
}

type dlQueue struct {
	q   *deadletter.Queue
	cfg config.DeadLetter
}

// queueOf returns key's queue for cfg, made on first use: its store opened
// (or shared), its replays handled by the transport. Called with e.mu held.
func (e *Engine) queueOf(key string, cfg config.DeadLetter) (*deadletter.Queue, error) {
	d := &e.dl
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, deadletter.ErrClosed
	}
	qcfg := cfg.Config
	qcfg.On = deadletter.OnCircuitOpen // the method decides; the queue's own is not read
	if dq, ok := d.queues[key]; ok {
		old := dq.cfg.Config
		old.On = qcfg.On
		if old == qcfg && sameRedis(dq.cfg, cfg) {
			return dq.q, nil
		}
		// Settings changed: a new queue on the same store, and the old one
		// closed on a goroutine of its own. queueOf may run inside that
		// queue's replay (its first call of a method the reload made
		// anew), which Close waits for: closing it here, under the
		// engine's locks, would wait on itself. The store's lease keeps
		// the two queues from replaying a key at once.
		prev := dq.q
		d.retiring.Go(func() { _ = prev.Close() })
		delete(d.queues, key)
	}
	st, err := e.storeOf(cfg)
	if err != nil {
		return nil, err
	}
	opts := []deadletter.Option{deadletter.WithClock(e.opts.Clock)}
	if e.opts.DeadLetterListener != nil {
		opts = append(opts, deadletter.WithListener(e.opts.DeadLetterListener))
	}
	q, err := deadletter.New(st, qcfg, opts...)
	if err != nil {
		return nil, err
	}
	if err := q.Handle(key, e.replay); err != nil {
		_ = q.Close()
		return nil, err
	}
	if d.queues == nil {
		d.queues = map[string]*dlQueue{}
	}
	d.queues[key] = &dlQueue{q: q, cfg: cfg}
	return q, nil
}

func sameRedis(a, b config.DeadLetter) bool {
	if a.Namespace != b.Namespace || (a.Redis == nil) != (b.Redis == nil) {
		return false
	}
	if a.Redis == nil {
		return true
	}
	ao, _ := a.Redis.Options()
	bo, _ := b.Redis.Options()
	return ao != nil && bo != nil && ao.Addr == bo.Addr && ao.DB == bo.DB
}

// storeOf opens (or shares) cfg's store. Called with d.mu held.
func (e *Engine) storeOf(cfg config.DeadLetter) (deadletter.Store, error) {
	d := &e.dl
	id := "local:" + cfg.Config.Path
	if cfg.Config.Store == deadletter.StoreRedis {
		// The server is part of the store: two sections with the same
		// namespace on two servers are two stores (the chain's client, or
		// the cluster's, when the section names none).
		server := ""
		if cfg.Redis != nil {
			if ro, _ := cfg.Redis.Options(); ro != nil {
				server = ro.Addr + "/" + strconv.Itoa(ro.DB)
			}
		}
		id = "redis:" + server + ":" + cfg.Namespace
	}
	if st, ok := d.stores[id]; ok {
		return st, nil
	}
	var st deadletter.Store
	var err error
	if cfg.Config.Store == deadletter.StoreRedis {
		rdb := e.opts.Redis
		if rdb == nil {
			rdb = e.ownRedis
		}
		if cfg.Redis != nil {
			ro, oerr := cfg.Redis.Options()
			if oerr != nil {
				return nil, oerr
			}
			if ro != nil {
				c := redis.NewClient(ro)
				d.rdbs = append(d.rdbs, c)
				rdb = c
			}
		}
		if rdb == nil {
			return nil, &config.PathError{Path: "deadLetter.redis", Problem: "store: redis needs redis (addr or url), a cluster section, or a client given in Go"}
		}
		st, err = redisstore.New(rdb, redisstore.WithNamespace(cfg.Namespace))
	} else {
		st, err = boltstore.Open(cfg.Config.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("deadLetter: %w", err)
	}
	if d.stores == nil {
		d.stores = map[string]deadletter.Store{}
	}
	d.stores[id] = st
	return st, nil
}

// replay is every key's handler: the transport makes the call again.
func (e *Engine) replay(ctx context.Context, en deadletter.Entry) error {
	r, ok := e.t.(Replayer)
	if !ok {
		return errNoReplayer
	}
	return r.Replay(ctx, en)
}

// errNoReplayer is a rejection: the queue stops the round, counts nothing.
var errNoReplayer = NotYet("meshless: this transport cannot replay deferred calls")

// NotYet returns the error of a replay that cannot be made yet (no
// connection to make it on): a resilience.Rejection, so that the replay
// round stops without counting it against the entry.
func NotYet(msg string) error { return &notYet{msg} }

type notYet struct{ msg string }

func (e *notYet) Error() string               { return e.msg }
func (e *notYet) RejectedBy() resilience.Kind { return resilience.KindDeadLetter }

// replays reports whether the engine keeps calls in dead-letter queues: a
// client whose transport can replay them (grpcmw's; not yet httpmw's).
func (e *Engine) replays() bool {
	_, ok := e.t.(Replayer)
	return ok && !e.opts.ServerSide && e.opts.Scope == config.GRPC
}

// hasDeadLetter reports whether any level of cfg writes a deadLetter
// section.
func hasDeadLetter(cfg *config.Config) bool {
	if cfg.Defaults.DeadLetter != nil {
		return true
	}
	for _, s := range cfg.Services {
		if s == nil {
			continue
		}
		if s.DeadLetter != nil {
			return true
		}
		for _, m := range s.Methods {
			if m != nil && m.DeadLetter != nil {
				return true
			}
		}
	}
	return false
}

// resumeDeadLetters opens the stores the configuration names, now (a store
// that cannot be opened is New's error), and gives a queue to every key
// that holds entries of a previous run, so that they are replayed without
// waiting for a call of that key.
func (e *Engine) resumeDeadLetters(cfg *config.Config) error {
	if !e.replays() || !hasDeadLetter(cfg) {
		return nil
	}
	seen := map[string]bool{}
	for _, group := range append([]string{Other}, sortedGroups(cfg)...) {
		m := cfg.Resolve(e.opts.Scope, group, Other)
		if m.DeadLetter == nil {
			continue
		}
		id := m.DeadLetter.Config.Path + "\x00" + m.DeadLetter.Namespace
		if seen[id] {
			continue
		}
		seen[id] = true
		e.dl.mu.Lock()
		st, err := e.storeOf(*m.DeadLetter)
		e.dl.mu.Unlock()
		if err != nil {
			return err
		}
		keys, err := st.Keys(context.Background())
		if err != nil {
			return fmt.Errorf("deadLetter: %w", err)
		}
		for _, key := range keys {
			svc, name, _ := strings.Cut(key, "/")
			km := cfg.Resolve(e.opts.Scope, svc, orOther(name))
			if km.DeadLetter == nil || km.Key != key {
				continue // the configuration no longer defers this key's calls
			}
			if _, err := e.queueOf(key, *km.DeadLetter); err != nil {
				return err
			}
		}
	}
	return nil
}

func orOther(name string) string {
	if name == "" {
		return Other
	}
	return name
}

func sortedGroups(cfg *config.Config) []string {
	gs := make([]string, 0, len(cfg.Services))
	for g := range cfg.Services {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	return gs
}

// Kick replays key's deferred calls now; an empty key replays every key's.
// A transport kicks every key when it gets the connection replays go
// through.
func (e *Engine) Kick(key string) {
	e.dl.mu.Lock()
	defer e.dl.mu.Unlock()
	for k, dq := range e.dl.queues {
		if key == "" || k == key {
			dq.q.Kick(k)
		}
	}
}

// detachDeadLetters marks the queues closed and returns what closes them,
// then their stores and the Redis clients dialled for them, for the
// caller to run once it holds no lock: a queue's Close waits for its
// replay, which may be waiting for the engine's lock (a method's first
// call). Called with e.mu held.
func (e *Engine) detachDeadLetters() func() {
	d := &e.dl
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	queues, stores, rdbs := d.queues, d.stores, d.rdbs
	d.queues, d.stores, d.rdbs = nil, nil, nil
	return func() {
		for _, dq := range queues {
			_ = dq.q.Close()
		}
		d.retiring.Wait()
		for _, st := range stores {
			_ = st.Close()
		}
		for _, c := range rdbs {
			_ = c.Close()
		}
	}
}

// deferFailed is deferCall of a call that failed, on a key with a queue.
func (c *Call) deferFailed(a Attempt, err error) error {
	m := c.m
	if m.observe {
		return err
	}
	switch {
	case m.dlOn.Has(deadletter.OnCircuitOpen) && errors.Is(err, circuitbreaker.ErrOpen):
	case m.dlOn.Has(deadletter.OnRetriesExhausted) && !resilience.IsRejection(err) && m.classes.outcome(err) == resilience.Failure:
	default:
		return err
	}
	d, ok := a.(Deferrable)
	if !ok {
		return err
	}
	returned := false
	defer func() {
		if !returned {
			// The entry's encoding or the queue panicked (it goes on up):
			// the call ends at the panic, as one whose attempt panicked
			// does, its context released.
			c.endPanicked(time.Time{})
		}
	}()
	kept := c.keep(d, err)
	returned = true
	return kept
}

// keep keeps the call of d, which failed with err, in its key's
// dead-letter queue, and returns the error for its caller (deferFailed).
func (c *Call) keep(d Deferrable, err error) error {
	m := c.m
	en, ok := d.Entry(c.caller)
	if !ok {
		return err
	}
	en.Key = m.Settings.Key
	kept := m.dlq.Defer(c.caller, en, err)
	if _, ok := kept.(*deadletter.DeferredError); !ok {
		// Not kept: err itself (not compared with ==, which panics on an
		// error of a type that is not comparable, a slice of errors).
		return err
	}
	return m.e.t.Rejection(kept)
}
