package dlqueues

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/deadletter/boltstore"
	"github.com/meshless/meshless/deadletter/redisstore"
	"github.com/meshless/meshless/resilience"
)

// Options are the collaborators of an engine's queues.
type Options struct {
	Clock    resilience.Clock
	Listener deadletter.Listener // nil: none
	// Redis serves a Redis store whose section names no server of its own:
	// the client given in Go, else the one the cluster section dialled;
	// nil: such a section is an error.
	Redis redis.UniversalClient
	// Replay is every key's handler: the transport makes the call again.
	Replay deadletter.Handler
	// MaxResume bounds the queues Resume opens (the engine's bound on its
	// keys); 0: no bound.
	MaxResume int
}

// Queues are an engine's dead-letter queues and their stores, for its
// life (reloads keep a queue whose settings did not change).
type Queues struct {
	opts   Options
	mu     sync.Mutex
	stores map[string]deadletter.Store // by "local:<path>" or "redis:<namespace>"
	queues map[string]*dlQueue         // by key
	rdbs   []redis.UniversalClient     // clients dialled for a store's own redis section
	closed bool
	// retiring: queues a reload replaced, closing on goroutines of their
	// own (see Queue).
	retiring sync.WaitGroup
}

type dlQueue struct {
	q   *deadletter.Queue
	cfg config.DeadLetter
}

// New returns an engine's queues, none made yet.
func New(opts Options) *Queues { return &Queues{opts: opts} }

// Queue returns key's queue for cfg, made on first use: its store opened
// (or shared), its replays handled by Options.Replay. The engine calls it
// with its own lock held.
func (d *Queues) Queue(key string, cfg config.DeadLetter) (*deadletter.Queue, error) {
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
		// closed on a goroutine of its own. Queue may run inside that
		// queue's replay (its first call of a method the reload made
		// anew), which Close waits for: closing it here, under the
		// engine's locks, would wait on itself. The store's lease keeps
		// the two queues from replaying a key at once.
		prev := dq.q
		d.retiring.Go(func() { _ = prev.Close() })
		delete(d.queues, key)
	}
	st, err := d.storeOf(cfg)
	if err != nil {
		return nil, err
	}
	opts := []deadletter.Option{deadletter.WithClock(d.opts.Clock)}
	if d.opts.Listener != nil {
		opts = append(opts, deadletter.WithListener(d.opts.Listener))
	}
	q, err := deadletter.New(st, qcfg, opts...)
	if err != nil {
		return nil, err
	}
	if err := q.Handle(key, d.opts.Replay); err != nil {
		_ = q.Close()
		return nil, err
	}
	if d.queues == nil {
		d.queues = map[string]*dlQueue{}
	}
	d.queues[key] = &dlQueue{q: q, cfg: cfg}
	return q, nil
}

// sameRedis reports whether a and b name the same Redis store's server
// and namespace (see storeID).
func sameRedis(a, b config.DeadLetter) bool {
	return a.Namespace == b.Namespace && redisServer(a) == redisServer(b)
}

// redisServer names the server of cfg's own redis section, "" when it
// names none (no section, or one without addr or url): the given client's,
// or the cluster's.
func redisServer(cfg config.DeadLetter) string {
	if cfg.Redis != nil {
		if ro, _ := cfg.Redis.Options(); ro != nil {
			return ro.Addr + "/" + strconv.Itoa(ro.DB)
		}
	}
	return ""
}

// storeID names cfg's store: "local:<path>" or "redis:<server>:<namespace>".
func storeID(cfg config.DeadLetter) string {
	if cfg.Config.Store != deadletter.StoreRedis {
		return "local:" + cfg.Config.Path
	}
	// The server is part of the store: two sections with the same
	// namespace on two servers are two stores (the chain's client, or the
	// cluster's, when the section names none).
	return "redis:" + redisServer(cfg) + ":" + cfg.Namespace
}

// storeOf opens (or shares) cfg's store. Called with d.mu held.
func (d *Queues) storeOf(cfg config.DeadLetter) (deadletter.Store, error) {
	id := storeID(cfg)
	if st, ok := d.stores[id]; ok {
		return st, nil
	}
	var st deadletter.Store
	var err error
	if cfg.Config.Store == deadletter.StoreRedis {
		rdb := d.opts.Redis
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

// Resume opens the stores the configuration names, now (a store that
// cannot be opened is the engine's New's error), and gives a queue to every
// key that holds entries of a previous run, so that they are replayed
// without waiting for a call of that key. It resolves cfg in scope; other
// is the engine's name of a group's fallback entry (engine.Other).
//
// A key no call of the engine can be kept under (reachable reports false:
// a service or method the client does not have, left by another client of
// a shared store, or by hand) gets no queue: its entries stay in the store,
// untouched, and each store's skipped keys are logged in one line. So are
// the keys past Options.MaxResume queues: their entries wait for their
// key's next call, which makes its queue.
func (d *Queues) Resume(cfg *config.Config, scope config.Scope, other string, reachable func(cfg *config.Config, key string) bool) error {
	if !hasDeadLetter(cfg) {
		return nil
	}
	seen := map[string]bool{}
	opened := 0
	for _, sec := range sections(cfg, other) {
		m := cfg.Resolve(scope, sec.group, sec.name)
		if m.DeadLetter == nil {
			continue
		}
		id := storeID(*m.DeadLetter) // a store's keys are read once
		if seen[id] {
			continue
		}
		seen[id] = true
		d.mu.Lock()
		st, err := d.storeOf(*m.DeadLetter)
		d.mu.Unlock()
		if err != nil {
			return err
		}
		keys, err := st.Keys(context.Background())
		if err != nil {
			return fmt.Errorf("deadLetter: %w", err)
		}
		skipped, example, over := 0, "", 0
		for _, key := range keys {
			if !reachable(cfg, key) {
				if skipped++; skipped == 1 {
					example = key
				}
				continue
			}
			svc, name, _ := strings.Cut(key, "/")
			km := cfg.Resolve(scope, svc, orOther(name, other))
			if km.DeadLetter == nil || km.Key != key {
				continue // the configuration no longer defers this key's calls
			}
			if d.opts.MaxResume > 0 && opened >= d.opts.MaxResume {
				over++
				continue
			}
			if _, err := d.Queue(key, *km.DeadLetter); err != nil {
				return err
			}
			opened++
		}
		if skipped > 0 {
			slog.Warn("meshless deadletter: the store holds keys no call of this client is kept under; their entries are left in the store, not replayed",
				"store", config.Clip(id), "skipped", skipped, "example", config.Clip(example))
		}
		if over > 0 {
			slog.Warn("meshless deadletter: the store holds more keys than the client keeps methods for; the others are replayed once a call of their key opens its queue",
				"store", config.Clip(id), "resumed", opened, "waiting", over)
		}
	}
	return nil
}

func orOther(name, other string) string {
	if name == "" {
		return other
	}
	return name
}

// section is a group and a name in it that cfg resolves.
type section struct{ group, name string }

// sections returns what may name a store of its own: the defaults, each
// group's fallback entry and each method a group writes (keyBy: method
// lets a method name its own store), sorted.
func sections(cfg *config.Config, other string) []section {
	out := []section{{other, other}}
	for _, g := range slices.Sorted(maps.Keys(cfg.Services)) {
		out = append(out, section{g, other})
		if s := cfg.Services[g]; s != nil {
			for _, name := range slices.Sorted(maps.Keys(s.Methods)) {
				out = append(out, section{g, name})
			}
		}
	}
	return out
}

// Kick replays key's deferred calls now; an empty key replays every key's.
func (d *Queues) Kick(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, dq := range d.queues {
		if key == "" || k == key {
			dq.q.Kick(k)
		}
	}
}

// Detach marks the queues closed and returns what closes them, then their
// stores and the Redis clients dialled for them, for the caller to run
// once it holds no lock: a queue's Close waits for its replay, which may be
// waiting for the engine's lock (a method's first call). The engine calls
// it with its own lock held.
func (d *Queues) Detach() func() {
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
