package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
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
// call while the cluster runs.
func (c *Cluster) Sync(ctx context.Context) error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	if err := c.flush(ctx); err != nil {
		return err
	}
	err := c.guard(func() error { return c.exchange(ctx) })
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
// exchange's result, when it comes, is an error.
func (c *Cluster) guard(exchange func() error) error {
	slow := fmt.Errorf("cluster: Redis did not answer within %v: %w", c.o.timeout(), context.DeadlineExceeded)
	t := time.AfterFunc(c.o.timeout(), func() { c.fallBack(slow) })
	err := exchange()
	if !t.Stop() && err == nil { // the timer fired, or is firing: too late
		err = slow
	}
	return err
}

type read struct {
	e      *entry
	w      circuitbreaker.Window
	fields *redis.MapStringStringCmd // nil with decideOn local
	open   *redis.StringCmd
}

// exchange is one pipelined round trip for every breaker. Called with
// syncMu held.
func (c *Cluster) exchange(ctx context.Context) error {
	entries := c.list()
	if len(entries) == 0 {
		return c.ping(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	now := c.o.clock.Now().UnixMilli()
	ttl := 3 * c.o.SyncInterval
	reads := make([]read, len(entries))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			r := read{e: e, w: e.b.Window()}
			if c.o.DecideOn != DecideLocal {
				wk := c.windowKey(e.name)
				if len(e.stale) > 0 {
					p.HDel(ctx, wk, e.stale...)
					e.stale = e.stale[:0]
				}
				if r.w.State == circuitbreaker.StateClosed {
					a := aggregate{calls: r.w.Calls, failures: r.w.Failures, slow: r.w.Slow, since: r.w.Since.UnixMilli(), at: now}
					p.HSet(ctx, wk, c.o.instance, a.encode())
					p.PExpire(ctx, wk, ttl)
				} else {
					p.HDel(ctx, wk, c.o.instance)
				}
				r.fields = p.HGetAll(ctx, wk)
			}
			r.open = p.Get(ctx, c.openKey(e.name))
			if r.w.State == circuitbreaker.StateHalfOpen && r.w.Granted > 0 && e.leaseRound != 0 {
				p.PExpire(ctx, c.probesKey(e.name, e.leaseRound), ttl) // still probing: keep the lease
			}
			reads[i] = r
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for _, r := range reads {
		c.apply1(r, now)
	}
	return nil
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	return c.rdb.Ping(ctx).Err()
}

// apply1 acts on what one breaker's exchange read. Called with syncMu held.
func (c *Cluster) apply1(r read, now int64) {
	e := r.e
	if v, err := r.open.Result(); err == nil {
		if o, ok := decodeOpening(v); ok && o.instance != c.o.instance {
			c.adopt(e, o, now)
		}
	}
	if r.fields == nil {
		return
	}
	fields, err := r.fields.Result()
	if err != nil {
		return
	}
	// The cluster's window: this instance's own counts as they are now, and
	// every other instance's that is fresh and began after the last close.
	var sum aggregate
	if r.w.State == circuitbreaker.StateClosed {
		sum = aggregate{calls: r.w.Calls, failures: r.w.Failures, slow: r.w.Slow}
	}
	fresh := now - 3*c.o.SyncInterval.Milliseconds()
	for inst, v := range fields {
		if inst == c.o.instance {
			continue
		}
		a, ok := decodeAggregate(v)
		switch {
		case !ok || a.at < fresh:
			if len(e.stale) < maxStale {
				e.stale = append(e.stale, inst) // a dead instance's, or garbage
			}
		case a.at >= e.lastClose: // written after the last close
			sum.calls += a.calls
			sum.failures += a.failures
			sum.slow += a.slow
		}
	}
	if c.o.DecideOn == DecideLocal || e.b.State() != circuitbreaker.StateClosed {
		return
	}
	if reason, over := exceeded(e.b.Config(), sum); over {
		e.b.Trip(reason) // its OnTransition flags it: flush claims and publishes the open
	}
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
			if w := e.b.Window(); w.State != circuitbreaker.StateHalfOpen || w.Granted > 0 || c.health.Load() != healthUp {
				continue
			}
			// Half-open with no probe leased: try again (a holder may have gone).
		}
		if err := c.guard(func() error { return c.act(ctx, e) }); err != nil {
			e.pending.Store(true)
			if ctx.Err() == nil { // else cut short, not Redis's failure (see Sync)
				c.setHealth(err)
			}
			return err
		}
	}
	return nil
}

// act handles one breaker's own change, by the state it is in now.
func (c *Cluster) act(ctx context.Context, e *entry) error {
	w := e.b.Window()
	now := c.o.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout())
	defer cancel()
	switch w.State {
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
		v, err := claimOpen.Run(ctx, c.rdb, []string{c.openKey(e.name)}, o.encode(), px, now.UnixMilli(), c.channel, msg.encode()).Text()
		if err != nil {
			return err // pending again: claimed once Redis answers, if still open
		}
		if won, ok := decodeOpening(v); ok && won.instance != c.o.instance && won.until != until {
			c.adopt(e, won, now.UnixMilli()) // another instance opened first: probe when it does
		} else {
			e.round = until
		}
	case circuitbreaker.StateHalfOpen:
		if w.Granted > 0 || c.health.Load() != healthUp {
			return nil
		}
		// The round is the open the cluster agreed on, which ended when this
		// half-open period began (give or take a timer's lateness); a round
		// further off is an earlier open's, and a breaker that opened alone
		// (Redis away) leases under its own.
		round, since := e.round, w.Since.UnixMilli()
		tol := max(e.b.Config().WaitDurationInOpenState.Milliseconds()/2, 1)
		if d := since - round; d > tol || d < -tol {
			round = since
		}
		limit := e.b.Config().PermittedNumberOfCallsInHalfOpenState
		px := (3 * c.o.SyncInterval).Milliseconds()
		n, err := leaseProbes.Run(ctx, c.rdb, []string{c.probesKey(e.name, round)}, limit, limit, px).Int()
		if err != nil {
			return err
		}
		if n < 0 { // another instance's probes closed this round
			if e.b.CloseRemote() {
				e.lastClose = now.UnixMilli()
			}
			return nil
		}
		e.leaseRound = round
		e.b.GrantProbes(n)
	case circuitbreaker.StateClosed:
		if circuitbreaker.State(e.lastTo.Load()) != circuitbreaker.StateClosed {
			return nil
		}
		// Closed by its own probes: close the key everywhere.
		e.lastClose = now.UnixMilli()
		msg := message{round: e.leaseRound, at: e.lastClose, instance: c.o.instance, name: e.name}
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			if e.leaseRound != 0 { // instances that missed the message learn it when they lease
				p.Set(ctx, c.probesKey(e.name, e.leaseRound), closedMark, 10*c.o.SyncInterval)
			}
			p.Publish(ctx, c.channel, msg.encode())
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
