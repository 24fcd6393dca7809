package engine

import (
	"context"
	"errors"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlqueues"
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

// resumeDeadLetters opens the stores the configuration names, now (a store
// that cannot be opened is New's error), and gives a queue to every key
// that holds entries of a previous run (dlqueues.Queues.Resume).
func (e *Engine) resumeDeadLetters(cfg *config.Config) error {
	if !e.replays() {
		return nil
	}
	return e.dl.Resume(cfg, e.opts.Scope, Other, func(cfg *config.Config, key string) bool {
		return dlqueues.Kept(cfg, e.opts.Scope, Other, key, e.t)
	})
}

// Kick replays key's deferred calls now; an empty key replays every key's.
// A transport kicks every key when it gets the connection replays go
// through.
func (e *Engine) Kick(key string) { e.dl.Kick(key) }

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
