package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience"
)

// Cluster shares the decisions of its breakers with the other instances
// that use the same Redis and namespace. Nothing it does is on a call's
// path: calls read their breaker alone, and the Cluster talks to Redis from
// its own goroutines. It is safe for concurrent use.
type Cluster struct {
	rdb     redis.UniversalClient
	o       options
	ns      string
	channel string
	alive   string // this instance's presence key

	// The breakers' coordinations while Redis answers and while it does not.
	up, down *coord.Coordination

	mu      sync.Mutex // entries and byName
	entries map[*circuitbreaker.Breaker]*entry
	byName  map[string][]*entry

	syncMu   sync.Mutex // serialises exchanges with Redis and the entries' sync fields
	lastNow  int64      // under syncMu: ms, when the last exchange began
	health   atomic.Int32
	hlog     healthLog   // which of health's changes are logged
	repaired atomic.Bool // a repair was logged as a warning

	notify chan struct{} // a breaker changed state by itself
	// stopped is done once Close has begun: the loop's exchanges are cut
	// short by it, and the loop and the listener return.
	stopped context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	// life orders Start and Close: Start adds to wg under it, only before
	// Close has marked the cluster closed, so that no Add races Close's
	// Wait and nothing starts once Close has begun.
	life      sync.Mutex
	started   bool // under life
	closed    bool // under life
	closeOnce sync.Once
}

// The values of Cluster.health.
const (
	healthUnknown int32 = iota // no sync yet
	healthUp
	healthDown
)

// entry is one breaker in the cluster.
type entry struct {
	b          *circuitbreaker.Breaker
	name       string // its name in keys and messages: keyName of the breaker's
	wkey, okey string // its window hash and open record
	args       syncArgs
	// pending is set by the breaker's OnTransition; the sync goroutine acts
	// on the breaker's state then.
	pending atomic.Bool
	reason  atomic.Uint32 // the reason of its last own open
	lastTo  atomic.Uint32 // the state of its last own change

	// Under Cluster.syncMu:
	round      int64    // untilMs of the open the breaker is in, as the cluster agreed it
	roundKey   int64    // that open's untilMs as its record says: its probes key (see adopt)
	leaseRound int64    // the round whose probes it has leased
	lastClose  int64    // ms: windows that started before are stale
	stale      []string // fields to delete at the next sync: garbage
	staleIf    []string // field, value pairs to delete at the next sync if unchanged: dead or far ahead
	own        ownField // this instance's field in the window hash
	leasedAt   int64    // ms: when it was last granted probes
	// The half-open period (its start, ms) whose unused probes it gave
	// back, and the calls its breaker had rejected then: it leases again
	// in that period only once it rejected a call since.
	gaveBack, gaveRejected int64
}

// New returns a Cluster that talks to Redis through rdb, which stays the
// caller's to close (after the Cluster). Any go-redis client works: a
// *redis.Client, a *redis.ClusterClient, a failover client, or a client of
// an in-process server such as miniredis. Call [Cluster.Start] to run it
// and [Cluster.Add] for each breaker. An invalid option is an error that
// names it.
func New(rdb redis.UniversalClient, opts ...Option) (*Cluster, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if rdb == nil {
		return nil, fmt.Errorf("cluster: %w", &resilience.OptionError{Option: "redis", Value: nil, Problem: "needs a client"})
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	c := &Cluster{
		rdb: rdb, o: o, ns: o.Namespace, channel: o.Namespace + ":events", alive: o.Namespace + ":alive:" + o.instance,
		entries: map[*circuitbreaker.Breaker]*entry{}, byName: map[string][]*entry{},
		notify: make(chan struct{}, 1),
	}
	c.stopped, c.stop = context.WithCancel(context.Background())
	c.up = &coord.Coordination{OnTransition: c.onTransition, LeaseProbes: true, ClusterDecides: o.DecideOn == DecideCluster}
	c.down = &coord.Coordination{OnTransition: c.onTransition}
	return c, nil
}

// Config returns the cluster's settings.
func (c *Cluster) Config() Config { return c.o.Config }

// InstanceID returns the name this instance writes under.
func (c *Cluster) InstanceID() string { return c.o.instance }

// Connected reports whether the last exchange with Redis succeeded.
func (c *Cluster) Connected() bool { return c.health.Load() == healthUp }

// Add makes b part of the cluster, under its name: instances share the
// breakers of the same name. Adding a breaker twice changes nothing, and
// so does adding one to a closed (or closing) cluster: b decides alone.
func (c *Cluster) Add(b *circuitbreaker.Breaker) {
	// Under life, as Close marks the cluster closed: a breaker added before
	// is in the list Close returns to deciding alone, and none is added after.
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[b]; ok {
		return
	}
	e := &entry{b: b, name: keyName(b.Name())}
	e.wkey, e.okey = c.windowKey(e.name), c.openKey(e.name)
	e.args = c.syncArgs(e)
	c.entries[b] = e
	c.byName[e.name] = append(c.byName[e.name], e)
	coord.Of(b).Coordinate(c.coordination())
}

// Remove takes b out of the cluster; it decides alone from then on.
func (c *Cluster) Remove(b *circuitbreaker.Breaker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[b]
	if !ok {
		return
	}
	delete(c.entries, b)
	list := c.byName[e.name]
	for i, x := range list {
		if x == e {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.byName, e.name)
	} else {
		c.byName[e.name] = list
	}
	coord.Of(b).Coordinate(nil)
}

func (c *Cluster) coordination() *coord.Coordination {
	if c.health.Load() == healthUp {
		return c.up
	}
	return c.down
}

func (c *Cluster) list() []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	return out
}

func (c *Cluster) named(name string) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*entry(nil), c.byName[name]...)
}

// onTransition is every breaker's OnTransition: it only flags the entry and
// wakes the sync goroutine, so a caller whose call moved a breaker never
// waits.
func (c *Cluster) onTransition(b any, _, to, reason uint8) {
	c.mu.Lock()
	e := c.entries[b.(*circuitbreaker.Breaker)]
	c.mu.Unlock()
	if e == nil {
		return
	}
	if circuitbreaker.State(to) == circuitbreaker.StateOpen {
		e.reason.Store(uint32(reason))
	}
	e.lastTo.Store(uint32(to))
	e.pending.Store(true)
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Start runs the cluster: a sync now and every sync interval, what the
// breakers do at once, and the channel's messages. It returns at once.
// Starting a started cluster, or one that is closed or closing, does
// nothing.
func (c *Cluster) Start() {
	c.life.Lock()
	defer c.life.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	c.wg.Add(2)
	go c.loop()
	go c.listen()
}

// Close stops the cluster and returns its breakers to deciding alone. It
// does not close the Redis client. Once Close has returned, the cluster's
// goroutines have ended and nothing starts them again ([Cluster.Start]
// does nothing), [Cluster.Add] adds nothing and [Cluster.Sync] does nothing
// but return an error; a second Close waits for the first.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.life.Lock()
		c.closed = true
		c.life.Unlock()
		c.stop()
		c.wg.Wait()
		// Under syncMu: a manual Sync that began before the cluster was
		// closed ends first, and one after finds it closed (Sync).
		c.syncMu.Lock()
		defer c.syncMu.Unlock()
		for _, e := range c.list() {
			c.Remove(e.b)
		}
		if c.health.Swap(healthUnknown) == healthUp && c.o.listener != nil {
			c.o.listener.Connected(false) // a closed cluster is not connected
		}
	})
}

// loop syncs every sync interval, and flushes what a breaker did at once.
// Its exchanges are cut short by Close (c.stopped), with no goroutine of
// its own to cancel them: before, one waited for Close to cancel the
// loop's context, and Close did not wait for it.
func (c *Cluster) loop() {
	defer c.wg.Done()
	ctx := c.stopped
	t := time.NewTicker(c.o.SyncInterval)
	defer t.Stop()
	_ = c.Sync(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = c.Sync(ctx)
		case <-c.notify:
			c.syncMu.Lock()
			c.flush(ctx)
			c.syncMu.Unlock()
		}
	}
}

// listen applies the channel's messages. go-redis reconnects the
// subscription by itself when Redis comes back.
func (c *Cluster) listen() {
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := c.rdb.Subscribe(ctx, c.channel)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-c.stopped.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			c.deliver(m.Payload)
		}
	}
}

// deliver acts on one message of the channel; anything but another
// instance's well-formed message is ignored.
func (c *Cluster) deliver(payload string) {
	if msg, ok := decodeMessage(payload); ok && msg.instance != c.o.instance {
		c.apply(msg)
	}
}

// apply acts on another instance's message. A close dated in the future
// counts as of now; an open ending past this instance's longest wait is
// adopted up to it, and its record's TTL bounded by it.
func (c *Cluster) apply(m message) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	now := c.o.clock.Now().UnixMilli()
	var fix []repair
	for _, e := range c.named(m.name) {
		if m.open {
			if end, far := c.adopt(e, m.opening, now); far && len(fix) == 0 {
				v := m.opening.encode()
				fix = append(fix, repair{key: c.openKey(m.name), want: "string", found: v,
					put: v, px: end - now, why: "an open past the longest wait"})
			}
			continue
		}
		if m.round >= e.round && coord.Of(e.b).CloseRemote() {
			e.lastClose = max(e.lastClose, min(m.at, now))
		}
	}
	if len(fix) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.timeout())
		defer cancel()
		_ = c.repairs(ctx, fix) // else the next sync finds the record
	}
}

// adopt opens e's breaker for the open o of another instance, if o is newer
// than the open it agreed on: from CLOSED or HALF_OPEN, or re-timing an open
// of its own that the cluster has not agreed on (the first open claimed
// wins, so that every instance probes at once). The breaker's wait ends no
// later than its own longest wait from now. An open ending further off than
// that and the clock skew is far: one no instance of this configuration
// writes, or one of an instance whose clock runs ahead of this one's (or
// this one's behind). adopt reports it, with end, the bound it adopted it
// up to, once and no more: a far open it adopted before (its roundKey) is
// not adopted again, so that reading it at each sync does not push the
// breaker's end further. Called with syncMu held.
//
// A far open is cut at each instance's own now, so the instances that cut
// one end it milliseconds apart: they lease its probes under the end its
// record says (roundKey), not their own cut, so that they probe in one
// round. Before, each leased its own round's limit, and one's close (of
// an earlier round than the others' cut) closed none of the others.
func (c *Cluster) adopt(e *entry, o opening, now int64) (end int64, far bool) {
	limit := now + longestWait(e.b.Config()).Milliseconds()
	written := o.until
	if o.until > limit+c.skew() {
		o.until, far = limit, true
	}
	if o.until <= now || o.until <= e.round || (far && written == e.roundKey) {
		return o.until, far
	}
	e.round, e.roundKey = o.until, written
	until := min(o.until, limit)
	if w := coord.Of(e.b).Window(); circuitbreaker.State(w.State) == circuitbreaker.StateOpen && w.Until.UnixMilli() == until {
		return o.until, far
	}
	if coord.Of(e.b).OpenRemote(time.Duration(until-now)*time.Millisecond, o.reopens, uint8(o.reason)) && c.o.listener != nil {
		c.o.listener.RemoteOpen(e.b.Name())
	}
	return o.until, far
}

// setHealth records the outcome of an exchange with Redis: the
// coordination of every breaker follows it, and a change is logged once,
// at a bounded rate (healthLog).
func (c *Cluster) setHealth(err error) {
	if l := c.o.listener; l != nil {
		l.Synced(err == nil)
	}
	c.switchHealth(err)
	c.logUnlogged(err)
}

// fallBack switches to local decisions at once, while an exchange is still
// waiting for Redis; the exchange is counted when it ends.
func (c *Cluster) fallBack(err error) { c.switchHealth(err) }

func (c *Cluster) switchHealth(err error) {
	next := healthUp
	if err != nil {
		next = healthDown
	}
	// Under hlog.mu, so that the lines logged follow the changes' order.
	c.hlog.mu.Lock()
	prev := c.health.Swap(next)
	if prev != next {
		c.logChange(prev, next, err)
	}
	c.hlog.mu.Unlock()
	if prev == next {
		return
	}
	if l := c.o.listener; l != nil && (next == healthUp || prev == healthUp) {
		l.Connected(next == healthUp)
	}
	// Under mu, as Add and Remove coordinate: a breaker removed meanwhile
	// must not be handed the cluster's coordination after its Remove (it
	// would lease its probes from a cluster that no longer knows it).
	c.mu.Lock()
	defer c.mu.Unlock()
	co := c.coordination()
	for _, e := range c.entries {
		coord.Of(e.b).Coordinate(co)
	}
}
