package deadletter

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Replay rounds. One goroutine per handled key runs them, so a key's
// entries are replayed one at a time, in order; the store's lease keeps
// other queues (other instances) off the key meanwhile.

// Backoff after a failed replay: the next round comes after
// failureBackoff × 2^(failed replays − 1), at most the interval.
const failureBackoff = time.Second

// releaseTimeout bounds giving a lease back once a round is over, even when
// the queue is closing.
const releaseTimeout = 5 * time.Second

// errPanicked is the error of a handler that panicked: a failed replay.
var errPanicked = errors.New("deadletter: the handler panicked")

func (q *Queue) run(ks *keyState) {
	defer q.wg.Done()
	wait := time.Duration(0) // the first round at once: entries a previous run left
	for {
		if wait > 0 {
			t := q.clock.NewTimer(wait)
			select {
			case <-q.ctx.Done():
			case <-ks.kick:
			case <-t.C():
			}
			t.Stop()
		}
		if q.ctx.Err() != nil {
			return
		}
		wait = q.round(ks)
	}
}

// round replays ks's waiting entries until none is left, a replay fails or
// is refused, or the queue closes, and returns the wait before the next
// round.
func (q *Queue) round(ks *keyState) time.Duration {
	ctx := q.ctx
	defer q.refresh(ks)
	lease, err := q.store.Lease(ctx, ks.key, q.owner, q.leaseTTL)
	if err != nil {
		if !errors.Is(err, ErrLeased) && ctx.Err() == nil {
			q.logStoreError("cannot lease the key for a replay round", ks.key, err)
		}
		return q.interval
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := lease.Release(rctx); err != nil {
			q.logStoreError("cannot release the key's lease", ks.key, err)
		}
	}()
	for {
		e, ok, err := lease.Next(ctx)
		var corrupt *CorruptError
		switch {
		case errors.As(err, &corrupt):
			q.emit(ks.key, EventDropped, 1)
			q.logStoreError("an entry could not be decoded and was dropped", ks.key, err)
			if ctx.Err() != nil {
				return q.interval // closing
			}
			continue
		case err != nil:
			if ctx.Err() == nil {
				q.logStoreError("cannot read the next entry to replay", ks.key, err)
			}
			return q.interval
		case !ok:
			return q.interval
		}
		if q.tooOld(e) {
			if !q.expire(ctx, ks, lease, e) {
				return q.interval
			}
			continue
		}
		if !q.pace(ks) {
			return q.interval
		}
		// Its turn can come after maxAge (a slow replayRate): then it is
		// expired, not replayed, and the turn is given back.
		if q.tooOld(e) {
			ks.nextAt = ks.nextAt.Add(-q.period)
			if !q.expire(ctx, ks, lease, e) {
				return q.interval
			}
			continue
		}
		err = q.replay(ks, e)
		switch {
		case ctx.Err() != nil:
			return q.interval // closing: the entry stays, uncounted
		case err == nil:
			if err := lease.Ack(ctx, e); err != nil {
				// Replayed but still kept: it will be replayed again
				// (at least once, as documented).
				q.logStoreError("a replayed entry could not be removed; it will be replayed again", ks.key, err)
				return q.interval
			}
			q.emit(ks.key, EventReplayed, 1)
		case resilience.IsRejection(err):
			// The entry waits, uncounted. The breaker opened again: its
			// close kicks the queue; the transport cannot replay yet (no
			// connection): its first connection kicks it. Any other policy
			// (a full bulkhead, a rate limit, the throttler) refused one
			// call, and nothing would kick the queue: soon again.
			r, _ := resilience.AsRejection(err)
			if k := r.RejectedBy(); k == resilience.KindCircuitBreaker || k == resilience.KindDeadLetter {
				return q.interval
			}
			return failureBackoff
		default:
			n, parked, ferr := lease.Fail(ctx, e, q.cfg.MaxReplays)
			if ferr != nil {
				q.logStoreError("cannot count a failed replay", ks.key, ferr)
				return q.interval
			}
			if parked {
				q.emit(ks.key, EventParked, 1)
				return failureBackoff
			}
			q.emit(ks.key, EventFailed, 1)
			return min(q.interval, failureBackoff<<max(0, min(n-1, 20)))
		}
	}
}

// tooOld reports whether e has waited maxAge or longer. An entry stamped
// more than maxAge ahead of the clock (a store's hostile or skewed content) could
// never expire: it is too old as well.
func (q *Queue) tooOld(e Entry) bool {
	age := q.clock.Now().Sub(e.Enqueued)
	return age >= q.cfg.MaxAge || age <= -q.cfg.MaxAge
}

// expire removes e, too old to replay, and counts it; false when the store
// failed (logged).
func (q *Queue) expire(ctx context.Context, ks *keyState, lease Lease, e Entry) bool {
	if err := lease.Expire(ctx, e); err != nil {
		q.logStoreError("cannot expire an entry", ks.key, err)
		return false
	}
	q.emit(ks.key, EventExpired, 1)
	return true
}

// pace waits until ks may start its next replay (Config.ReplayRate), and
// reports false when the queue closed meanwhile.
func (q *Queue) pace(ks *keyState) bool {
	now := q.clock.Now()
	if wait := ks.nextAt.Sub(now); wait > 0 {
		t := q.clock.NewTimer(wait)
		defer t.Stop()
		select {
		case <-q.ctx.Done():
			return false
		case <-t.C():
		}
		now = q.clock.Now()
	}
	if ks.nextAt.Before(now) {
		ks.nextAt = now
	}
	ks.nextAt = ks.nextAt.Add(q.period)
	return true
}

// replay calls ks's handler for e with the replay's ID and deadline. A panic
// in the handler is a failed replay, logged with its stack.
func (q *Queue) replay(ks *keyState, e Entry) (err error) {
	ctx, cancel := context.WithTimeout(WithReplayID(q.ctx, e.ID), q.cfg.ReplayTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			q.logger.Error("meshless deadletter: a replay handler panicked", "key", ks.key, "id", e.ID,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = errPanicked
		}
	}()
	return ks.fn(ctx, e)
}

// refresh reads ks's figures from the store into its gauges.
func (q *Queue) refresh(ks *keyState) {
	if q.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), releaseTimeout)
	defer cancel()
	var st Stats
	ok := false
	ks.reading()
	defer func() { ks.read(st, ok) }() // ends the read on every path
	st, err := q.store.Stats(ctx, ks.key)
	if err != nil {
		q.logStoreError("cannot read the key's figures", ks.key, err)
		return
	}
	ok = true
}
