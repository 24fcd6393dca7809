package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
)

// maxStale bounds the stale fields one sync deletes from one window hash.
const maxStale = 64

// Sync exchanges with Redis once, as the background loop does every sync
// interval: it publishes what the breakers did since, publishes each closed
// breaker's window and reads the cluster's, adopts opens it missed on the
// channel, and opens a breaker when the cluster's counts cross its
// thresholds (decideOn cluster or either). Each exchange is bounded by the
// configured timeout. An error means Redis did not answer: every breaker
// then decides locally until a sync succeeds. Sync is for tests and for
// programs that want a sync at a moment of their choosing; it is safe to
// call while the cluster runs. Once the cluster is closed (or closing) Sync
// does nothing: it sends nothing to Redis, changes no breaker, and returns
// an error that says the cluster is closed.
func (c *Cluster) Sync(ctx context.Context) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.life.Lock()
	closed := c.closed
	c.life.Unlock()
	if closed {
		return errClosed
	}
	return redacted(c.sync(ctx))
}

// errClosed is Sync's error on a closed cluster.
var errClosed = errors.New("cluster: Sync after Close: the cluster is closed")

func (c *Cluster) sync(ctx context.Context) error {
	if err := c.flush(ctx); err != nil {
		return err
	}
	err := c.guard(func(d *deadline) error { return c.exchange(ctx, d) })
	if err != nil && ctx.Err() != nil {
		// Cut short by the caller, or by Close (whose loop may start a sync
		// as it stops): says nothing about Redis, so neither counted nor
		// logged.
		return err
	}
	c.setHealth(err)
	if err != nil {
		return err
	}
	return c.flush(ctx)
}

// guard runs one exchange with Redis. Past the timeout the exchange has
// failed, whether or not the client honours its context (go-redis does not
// unless ContextTimeoutEnabled is set; it waits for ReadTimeout instead):
// every breaker falls back to local decisions at that moment, and the
// exchange's result, when it comes, is an error. The timeout's verdict
// runs on the timer's goroutine; guard returns only once it has landed,
// so that it never lands after the Sync that ran the exchange (or Close,
// which waits for that Sync) returned.
//
// A reply and the timeout race to decide the exchange (deadline): the
// exchange calls inTime before it acts on what Redis answered, and a reply
// that comes once the timeout has decided is not acted on (the round was
// declared failed; what it would change waits for the next sync).
func (c *Cluster) guard(exchange func(d *deadline) error) error {
	var d deadline
	fired := make(chan struct{})
	t := time.AfterFunc(c.o.timeout(), func() {
		defer close(fired)
		if d.state.CompareAndSwap(pending, timedOut) {
			c.fallBack(c.tooSlow())
		}
	})
	err := exchange(&d)
	d.inTime()     // an exchange that acted on nothing: decided now, if still undecided
	if !t.Stop() { // the timer fired, or is firing
		<-fired
	}
	if err == nil && d.state.Load() == timedOut {
		err = c.tooSlow()
	}
	return err
}

// deadline is what decided one exchange: its reply (inTime), or its
// timeout, whichever came first.
type deadline struct{ state atomic.Int32 }

// The states of deadline.
const (
	pending int32 = iota
	answered
	timedOut
)

// inTime reports whether the exchange's reply came before its timeout: the
// exchange may act on it. Once false, it stays false.
func (d *deadline) inTime() bool {
	return d.state.CompareAndSwap(pending, answered) || d.state.Load() == answered
}

// tooSlow is the error of an exchange that passed its timeout.
func (c *Cluster) tooSlow() error {
	return fmt.Errorf("cluster: Redis did not answer within %v: %w", c.o.timeout(), context.DeadlineExceeded)
}

type read struct {
	e      *entry
	w      coord.Window
	writes [4]redis.Cmder // the window hash's writes, writes[:nw]
	nw     int
	set    aggregate      // the window written, when written
	wrote  uint8          // the own field's state once the writes succeed; fieldUnknown when none
	fields *redis.ScanCmd // nil with decideOn local, and for a breaker not CLOSED
	open   *redis.StringCmd
}

// exchange is one pipelined round trip for every breaker, and a second one
// when a key needs repairing. A reply that comes past d's timeout is not
// acted on. Called with syncMu held.
func (c *Cluster) exchange(ctx context.Context, d *deadline) error {
	entries := c.list()
	if len(entries) == 0 {
		return c.ping(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	now := c.o.clock.Now().UnixMilli()
	gap := c.gap(now)
	ttl := horizon * c.o.SyncInterval
	reads := make([]read, len(entries))
	cmds, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		// A write at every sync, whatever the windows do: a Redis that
		// refuses writes (out of memory, a read-only replica) is down.
		p.Set(ctx, c.alive, strconv.FormatInt(now, 10), ttl)
		for i, e := range entries {
			r := &reads[i]
			r.e, r.w = e, coord.Of(e.b).Window()
			if c.o.DecideOn != DecideLocal {
				c.publish(ctx, p, r, now, gap)
			}
			r.open = e.args.getrange(ctx, p)
			if circuitbreaker.State(r.w.State) == circuitbreaker.StateHalfOpen && r.w.Granted > 0 && e.leaseRound != 0 {
				c.keepOrGiveBack(ctx, p, r, now)
			}
		}
		return nil
	})
	if err := redisDown(cmds, err); err != nil {
		return err
	}
	if !d.inTime() {
		return c.tooSlow()
	}
	var fix []repair
	for i := range reads {
		fix = c.apply1(&reads[i], now, fix)
	}
	return c.repairs(ctx, fix)
}

// keepOrGiveBack queues the renewal of the lease of r's breaker while one
// of its probes is out. A holder that handed out none of them for a sync
// interval (no call came) gives them back, so that the instances whose
// calls wait for probes lease them; before, it renewed the lease at every
// sync and held the others HALF_OPEN, rejecting every call, for as long
// as it had no call to probe with. Called with syncMu held.
func (c *Cluster) keepOrGiveBack(ctx context.Context, p redis.Pipeliner, r *read, now int64) {
	e, key := r.e, c.probesKey(r.e.name, r.e.leaseRound)
	switch {
	case r.w.Out > 0:
		// Still probing: keep the lease. A count Redis lost (flushed,
		// evicted, restarted empty) is written back as this instance's
		// grant, unless one is there (another lease since, or the round
		// closed): the next instance to lease finds the limit taken.
		ttl := horizon * c.o.SyncInterval
		p.SetNX(ctx, key, r.w.Granted, ttl)
		p.PExpire(ctx, key, ttl)
	case now-e.leasedAt >= c.o.SyncInterval.Milliseconds():
		if n := coord.Of(e.b).ReturnProbes(); n > 0 {
			e.gaveBack, e.gaveRejected = r.w.Since.UnixMilli(), r.w.Rejected
			// Sent once: a client that retries (go-redis after a lost
			// reply) would give the probes back twice, and let the others
			// lease more than the limit. The whole pipeline is then not
			// retried: the sync fails, as with Redis away.
			_ = p.Process(ctx, noRetry{redis.NewCmd(ctx, "eval", giveBack, 1, key, n)})
		}
	}
}

// noRetry is a command that the client does not send again after an error
// (a lost reply is no proof that it did not run): for a script that is not
// idempotent. go-redis honours it in single commands and pipelines alike.
type noRetry struct{ *redis.Cmd }

func (noRetry) NoRetry() bool { return true }

// publish queues r's breaker's writes to its window hash, and the read of
// it when the breaker is CLOSED: dead instances' fields are deleted; a
// CLOSED breaker's window is written when mustWrite says so; a breaker in
// another state deletes its field, once. Called with syncMu held.
func (c *Cluster) publish(ctx context.Context, p redis.Pipeliner, r *read, now, gap int64) {
	e := r.e
	if len(e.stale) > 0 {
		r.writes[r.nw] = p.HDel(ctx, e.wkey, e.stale...)
		r.nw++
		e.stale = e.stale[:0]
	}
	if len(e.staleIf) > 0 {
		args := make([]any, len(e.staleIf))
		for i, s := range e.staleIf {
			args[i] = s
		}
		r.writes[r.nw] = p.Eval(ctx, delStale, []string{e.wkey}, args...)
		r.nw++
		e.staleIf = e.staleIf[:0]
	}
	if circuitbreaker.State(r.w.State) != circuitbreaker.StateClosed {
		if e.own.state != fieldDeleted {
			r.writes[r.nw] = p.HDel(ctx, e.wkey, c.o.instance)
			r.nw++
			r.wrote = fieldDeleted
		}
		return // its peers' windows decide nothing for it
	}
	a := aggregate{calls: r.w.Calls, failures: r.w.Failures, slow: r.w.Slow, since: r.w.Since.UnixMilli(), at: now}
	if c.mustWrite(e.own, a, gap) {
		r.writes[r.nw] = e.args.hsetOwn(ctx, p, a.encode())
		r.writes[r.nw+1] = e.args.pexpire(ctx, p)
		r.nw += 2
		r.set, r.wrote = a, fieldWritten
	} else {
		e.own.skipped++
	}
	r.fields = e.args.hscan(ctx, p)
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	return c.rdb.Ping(ctx).Err()
}

// apply1 acts on what one breaker's exchange read, and returns fix with the
// repairs its keys need. Called with syncMu held.
func (c *Cluster) apply1(r *read, now int64, fix []repair) []repair {
	e := r.e
	switch v, err := r.open.Result(); {
	case err == nil:
		fix = c.readOpen(e, e.okey, v, now, fix)
	case keyProblem(err):
		fix = append(fix, repair{key: e.okey, want: "string", why: err.Error()})
	}
	// A window hash that is not one, or holds more instances than one key
	// shares, is repaired and its fields counted not at all; this
	// instance's field is written again at the next sync.
	var err error
	for _, w := range r.writes[:r.nw] {
		if err = w.Err(); err != nil {
			break // a key problem: redisDown let it through
		}
	}
	var pairs []string
	var cursor uint64
	if r.fields != nil {
		if p, cur, ferr := r.fields.Result(); ferr != nil {
			err = ferr
		} else {
			pairs, cursor = p, cur
		}
	}
	if err == nil && (cursor != 0 || len(pairs)/2 > MaxInstances) {
		// A cursor to follow, or more fields in one reply (a hash kept in
		// one listpack, hash-max-listpack-entries raised, comes whole).
		err = errors.New("more than " + strconv.Itoa(MaxInstances) + " instances")
	}
	switch {
	case err != nil:
		fix = append(fix, repair{key: e.wkey, want: "hash", why: err.Error()})
		e.own, pairs = ownField{}, nil
	case r.wrote != fieldUnknown:
		e.own = ownField{state: r.wrote, agg: r.set}
	}
	if r.fields == nil {
		return fix
	}
	// The cluster's window: this instance's own counts as they are now, and
	// every other instance's that is fresh, not from the future, began after
	// the last close, each capped by what a window holds.
	var sum aggregate
	if circuitbreaker.State(r.w.State) == circuitbreaker.StateClosed {
		sum = aggregate{calls: r.w.Calls, failures: r.w.Failures, slow: r.w.Slow}
	}
	cfg := e.b.Config()
	limit := peerCap(cfg, sum.calls)
	fresh, future := now-horizon*c.o.SyncInterval.Milliseconds(), now+c.skew()
	own := false
	for i := 0; i+1 < len(pairs); i += 2 {
		inst, v := pairs[i], pairs[i+1]
		a, ok := decodeAggregate(v)
		if inst == c.o.instance {
			own = ok && e.own.state == fieldWritten && a == e.own.agg
			continue
		}
		switch {
		case !ok:
			if len(e.stale) < maxStale {
				e.stale = append(e.stale, inst) // garbage: no instance writes it
			}
		case a.at < fresh || a.at > future:
			if len(e.staleIf) < 2*maxStale {
				// A dead instance's, or a clock far ahead: deleted at the
				// next sync if it still holds v (delStale), so that an
				// instance that was only late and wrote it since keeps it.
				e.staleIf = append(e.staleIf, inst, v)
			}
		case a.at >= e.lastClose: // written after the last close
			a = capped(a, limit)
			sum.calls += a.calls
			sum.failures += a.failures
			sum.slow += a.slow
		}
	}
	if e.own.state == fieldWritten && !own {
		// This instance's field is not what it wrote (deleted by a peer
		// that judged it dead, the hash expired or repaired, Redis
		// restarted empty, rewritten by hand): written again at the next
		// sync, not when the window next moves or is re-stamped.
		e.own = ownField{}
	}
	if c.o.DecideOn == DecideLocal || e.b.State() != circuitbreaker.StateClosed {
		return fix
	}
	if reason, over := exceeded(cfg, sum); over {
		coord.Of(e.b).Trip(uint8(reason)) // its OnTransition flags it: flush claims and publishes the open
	}
	return fix
}

// readOpen acts on the open record v of e's key: garbage is deleted, an
// open ending past this instance's longest wait (and the clock skew) is
// adopted up to that bound, and the record's TTL bounded by it. Called with
// syncMu held.
func (c *Cluster) readOpen(e *entry, key, v string, now int64, fix []repair) []repair {
	if v == "" {
		return fix // no open record
	}
	o, ok := decodeOpening(v)
	switch {
	case !ok && len(v) > maxRecord:
		return append(fix, repair{key: key, want: "*", why: "not an open record"}) // too long to send back
	case !ok:
		return append(fix, repair{key: key, want: "string", found: v, why: "not an open record"})
	}
	if o.instance == c.o.instance {
		return fix
	}
	if end, far := c.adopt(e, o, now); far {
		// Its TTL bounded, its content kept: rewritten to this instance's
		// bound, an end by this clock, it was over for the instances whose
		// clocks run minutes ahead of this one's, and every pod that learns
		// an open from the record did not open.
		fix = append(fix, repair{key: key, want: "string", found: v, put: v, px: end - now, why: "an open past the longest wait", far: true})
	}
	return fix
}

// exceeded applies a breaker's thresholds to the cluster's counts, as the
// breaker applies them to its own window.
func exceeded(cfg circuitbreaker.Config, n aggregate) (circuitbreaker.Reason, bool) {
	if n.calls == 0 || n.calls < int64(cfg.MinimumNumberOfCalls) {
		return circuitbreaker.ReasonNone, false
	}
	if float64(n.failures)*100/float64(n.calls) >= cfg.FailureRateThreshold {
		return circuitbreaker.ReasonFailureRate, true
	}
	if float64(n.slow)*100/float64(n.calls) >= cfg.SlowCallRateThreshold {
		return circuitbreaker.ReasonSlowCallRate, true
	}
	return circuitbreaker.ReasonNone, false
}

// flush acts on what the breakers did by themselves since the last flush:
// an open is claimed and published, a half-open breaker leases its probes,
// a close by probes is published. Called with syncMu held. The first failed
// exchange ends it, marks Redis down and leaves the rest pending.
func (c *Cluster) flush(ctx context.Context) error {
	for _, e := range c.list() {
		if !e.pending.Swap(false) {
			w := coord.Of(e.b).Window()
			if circuitbreaker.State(w.State) != circuitbreaker.StateHalfOpen || !w.Leased || w.Granted > 0 || c.health.Load() != healthUp {
				continue
			}
			if e.gaveBack == w.Since.UnixMilli() && w.Rejected == e.gaveRejected {
				continue // it gave its probes back, and no call has waited for one since
			}
			// Half-open with no probe leased: try again (a holder may have gone).
		}
		err := c.guard(func(d *deadline) error { return c.act(ctx, e, d) })
		if err == nil {
			continue
		}
		e.pending.Store(true)
		if errors.Is(err, errRepaired) {
			continue // the key was put right: acted on at the next flush
		}
		if ctx.Err() == nil { // else cut short, not Redis's failure (see Sync)
			c.setHealth(err)
		}
		return err
	}
	return nil
}

// errRepaired is act's error when a script failed on what its key held and
// the key was deleted: the breaker's change is still pending.
var errRepaired = errors.New("cluster: a key was repaired")

// keyFailed handles act's error err on key: a key problem deletes the key
// and reports errRepaired; any other error is returned as it is.
func (c *Cluster) keyFailed(ctx context.Context, key string, err error) error {
	if !keyProblem(err) {
		return err
	}
	if rerr := c.repairs(ctx, []repair{{key: key, want: "*", why: err.Error()}}); rerr != nil {
		return rerr
	}
	return errRepaired
}

// act handles one breaker's own change, by the state it is in now. A reply
// that comes past d's timeout is not acted on: the change stays pending (a
// claim found in force is this instance's own at the next flush; probes
// leased too late are held by no one until the lease expires, three sync
// intervals, while this instance probes alone).
func (c *Cluster) act(ctx context.Context, e *entry, d *deadline) error {
	w := coord.Of(e.b).Window()
	now := c.o.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	switch circuitbreaker.State(w.State) {
	case circuitbreaker.StateOpen:
		until := w.Until.UnixMilli()
		if until == e.round {
			return nil // the cluster's open, adopted
		}
		o := opening{until: until, reopens: w.Reopens, reason: circuitbreaker.Reason(e.reason.Load()), instance: c.o.instance}
		if o.reason == circuitbreaker.ReasonNone {
			o.reason = circuitbreaker.ReasonFailureRate
		}
		px := max(until-now.UnixMilli(), 1)
		msg := message{open: true, opening: o, instance: c.o.instance, name: e.name}
		latest := now.UnixMilli() + longestWait(e.b.Config()).Milliseconds() + c.skew()
		key := e.okey
		res, err := claimOpen.Run(ctx, c.rdb, []string{key}, o.encode(), px, now.UnixMilli(), c.channel, msg.encode(), latest).Slice()
		if err != nil {
			return c.keyFailed(ctx, key, err) // pending again: claimed once Redis answers, if still open
		}
		if !d.inTime() {
			return c.tooSlow()
		}
		v, replaced := claimed(res)
		switch replaced {
		case 1:
			c.logRepair(repair{key: key, why: "claimed over what no instance writes"})
		case 2:
			c.logRepair(repair{key: key, why: "claimed over an open past the longest wait", far: true})
		}
		if won, ok := decodeOpening(v); ok && won.instance != c.o.instance && won.until != until {
			c.adopt(e, won, now.UnixMilli()) // another instance opened first: probe when it does
		} else {
			e.round, e.roundKey = until, until
		}
	case circuitbreaker.StateHalfOpen:
		if !w.Leased || w.Granted > 0 || c.health.Load() != healthUp {
			return nil // leased already, or probing alone (turned HALF_OPEN while Redis was away)
		}
		// The round is the open the cluster agreed on, which ended when this
		// half-open period began (give or take a timer's lateness), under
		// the end its record says (a far open cut to this breaker's longest
		// wait: see adopt); a round further off is an earlier open's, and a
		// breaker that opened alone (Redis away) leases under its own.
		round, since := e.roundKey, w.Since.UnixMilli()
		tol := max(e.b.Config().WaitDurationInOpenState.Milliseconds()/2, 1)
		if d := since - e.round; d > tol || d < -tol {
			round = since
		}
		limit := e.b.Config().PermittedNumberOfCallsInHalfOpenState
		px := (3 * c.o.SyncInterval).Milliseconds()
		key := c.probesKey(e.name, round)
		n, err := leaseProbes.Run(ctx, c.rdb, []string{key}, limit, limit, px).Int()
		if err != nil {
			return c.keyFailed(ctx, key, err)
		}
		if !d.inTime() {
			return c.tooSlow()
		}
		if n < 0 { // another instance's probes closed this round
			if coord.Of(e.b).CloseRemote() {
				e.lastClose = now.UnixMilli()
			}
			return nil
		}
		e.leaseRound = round
		if coord.Of(e.b).GrantProbes(n) > 0 {
			e.leasedAt = now.UnixMilli()
		}
	case circuitbreaker.StateClosed:
		if circuitbreaker.State(e.lastTo.Load()) != circuitbreaker.StateClosed {
			return nil
		}
		// Closed by its own probes: close the key everywhere.
		e.lastClose = now.UnixMilli()
		msg := message{round: e.leaseRound, at: e.lastClose, instance: c.o.instance, name: e.name}
		cmds, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if e.leaseRound != 0 { // instances that missed the message learn it when they lease
				p.Set(ctx, c.probesKey(e.name, e.leaseRound), closedMark, 10*c.o.SyncInterval) // whatever the key held
			}
			p.Publish(ctx, c.channel, msg.encode())
			return nil
		})
		return redisDown(cmds, err)
	}
	return nil
}
