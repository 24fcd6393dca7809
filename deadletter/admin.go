package deadletter

import (
	"context"
	"fmt"
)

// The operator's API: list, requeue and purge parked entries through a
// running queue, which counts what it does ([EventRequeued],
// [EventPurged]). The same operations work on a [Store] directly, for tools
// that run without a queue (cmd/meshless-deadletter).

// List returns up to n (at most [MaxList]) of key's entries in state, oldest
// first, after the position after ("" for the first; then the last
// entry's Pos).
func (q *Queue) List(ctx context.Context, key string, state State, after string, n int) ([]Entry, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return q.store.List(ctx, key, state, after, min(max(n, 0), MaxList))
}

// Requeue moves the parked entry id of key back to the tail of its waiting
// entries, to be replayed again from scratch (no failed replays, its age
// from now, the same ID), and kicks a round.
func (q *Queue) Requeue(ctx context.Context, key, id string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ks := q.key(key)
	var started uint64
	if ks != nil {
		started = ks.start()
	}
	now := q.clock.Now()
	if err := q.store.Requeue(ctx, key, id, now); err != nil {
		return fmt.Errorf("deadletter: requeue %q of key %q: %w", id, key, err)
	}
	q.emit(key, EventRequeued, 1)
	if ks != nil {
		ks.requeued(started, now.UnixNano())
	}
	q.Kick(key)
	return nil
}

// Purge deletes the parked entry id of key.
func (q *Queue) Purge(ctx context.Context, key, id string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ks := q.key(key)
	var started uint64
	if ks != nil {
		started = ks.start()
	}
	if err := q.store.Purge(ctx, key, id); err != nil {
		return fmt.Errorf("deadletter: purge %q of key %q: %w", id, key, err)
	}
	q.emit(key, EventPurged, 1)
	if ks != nil {
		ks.unparked(started)
	}
	return nil
}
