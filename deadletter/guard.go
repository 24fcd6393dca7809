package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshless/meshless/circuitbreaker"
)

// Guard runs an event handler that is not a gRPC or HTTP call (a
// message-broker consumer, a job) through a circuit breaker, and defers the
// events the open breaker refuses instead of failing them: they are replayed
// later through the same handler and breaker. The consumer acks an event
// whose Do returned nil or a [DeferredError] (errors.Is [ErrDeferred]): it
// is handled, or kept.
//
// Order: deferred events of the key are replayed oldest first; an event
// handled live after the breaker closed may overtake deferred ones.
//
// A Guard is safe for concurrent use.
type Guard struct {
	q   *Queue
	br  *circuitbreaker.Breaker
	key string
	fn  Handler
}

// NewGuard returns a guard that runs fn through br and defers into q under
// the breaker's name as key; it registers the key's replay handler with q
// ([Queue.Handle]). q replays the deferred events through br and fn, a
// round at each interval; a successful live event also kicks a round when
// entries wait.
func NewGuard(q *Queue, br *circuitbreaker.Breaker, fn Handler) (*Guard, error) {
	if q == nil || br == nil || fn == nil {
		return nil, errors.New("deadletter: NewGuard needs a queue, a breaker and a handler")
	}
	g := &Guard{q: q, br: br, key: br.Name(), fn: fn}
	if err := q.Handle(g.key, g.replay); err != nil {
		return nil, fmt.Errorf("deadletter: guard for breaker %q: %w", g.key, err)
	}
	return g, nil
}

// Do handles one event: it calls the handler with e through the breaker.
// When the breaker refuses the call (and the queue's Config.On has
// [OnCircuitOpen]), the event is deferred: Do returns a [*DeferredError],
// or the breaker's own error when the queue could not keep it. Any other
// error is the handler's, unchanged. e.Key is set to the guard's key; a
// non-empty e.ID (the broker's message ID, say) becomes the replay id.
func (g *Guard) Do(ctx context.Context, e Entry) error {
	e.Key = g.key
	err := g.call(ctx, e)
	switch {
	case err == nil:
		if g.q.Pending(g.key) > 0 {
			g.q.Kick(g.key) // the breaker lets calls through: replay the backlog
		}
		return nil
	case errors.Is(err, circuitbreaker.ErrOpen) && g.q.cfg.On.Has(OnCircuitOpen):
		return g.q.Defer(ctx, e, err)
	}
	return err
}

func (g *Guard) replay(ctx context.Context, e Entry) error { return g.call(ctx, e) }

// call runs the handler through the breaker; Execute records a panic as a
// failure before it goes on up.
func (g *Guard) call(ctx context.Context, e Entry) error {
	return g.br.Execute(ctx, func(ctx context.Context) error { return g.fn(ctx, e) })
}
