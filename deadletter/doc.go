// Package deadletter keeps the calls that an open circuit breaker refuses,
// instead of dropping them, and replays them once the breaker closes: a
// durable, bounded dead-letter queue with replay, for work whose answer
// the caller does not wait for (events, notifications, writes that may land
// later).
//
// A [Queue] defers calls into a [Store] — a local bbolt file
// (deadletter/boltstore) or Redis Streams shared by every instance of a
// client (deadletter/redisstore) — and replays them per key, oldest first,
// through a [Handler] that makes the call again through the same policies.
// The caller of a deferred call gets a [*DeferredError] (errors.Is
// [ErrDeferred]), never a fake success, so an event consumer can ack an
// event knowing it is kept.
//
//	store, err := boltstore.Open("/var/lib/app/deadletter.db")
//	q, err := deadletter.New(store, deadletter.Config{MaxAge: time.Hour})
//	defer store.Close()
//	defer q.Close()
//	err = q.Handle("pkg.Svc", replayThroughTheChain) // one handler per breaker key
//	...
//	err = breaker.Execute(ctx, call)
//	if errors.Is(err, circuitbreaker.ErrOpen) {
//		err = q.Defer(ctx, deadletter.Entry{Key: "pkg.Svc", Payload: req}, err)
//	}
//	return err // a *DeferredError, or the breaker's own error when not kept
//
// [Guard] does exactly this around an event handler with a
// circuit breaker: see its example.
//
// # Lifecycle of an entry
//
// Every entry ends replayed, parked or expired, each counted ([Listener]):
// nothing is lost silently.
//
//   - [Queue.Defer] appends it durably (synced to disk, or to Redis's
//     append-only file) before it returns; a key already at
//     Config.MaxEntries or Config.MaxBytes refuses it, and the caller gets
//     its original error.
//   - A replay round takes the key's lease (one replayer per key across all
//     instances) and replays its waiting entries oldest first, at most
//     Config.ReplayRate a second, each within Config.ReplayTimeout and
//     carrying its ID ([ReplayID], sent as the [ReplayIDHeader] header) so
//     that a server can deduplicate. Rounds run when a key is first handled
//     (entries left by a previous run), on [Queue.Kick] (the engine kicks
//     when the key's breaker closes) and every interval ([WithInterval]).
//   - A replay that succeeds removes the entry. A replay refused by a
//     policy (a [resilience.Rejection]: the breaker opened again) stops the
//     round and leaves the entry as it was. Any other error counts a failed
//     replay and stops the round (the entries behind it would meet the same
//     backend); the next round comes after a backoff. After
//     Config.MaxReplays failed replays the entry is parked: it waits for an
//     operator ([Queue.Requeue], [Queue.Purge]) and no longer blocks the
//     key.
//   - An entry that has waited Config.MaxAge or longer is expired instead
//     of replayed.
//
// # Delivery
//
// At least once. A replay whose success could not be recorded (the process
// died between the call and the store's acknowledgement, the store was
// away) is replayed again, with the same ID. Order is kept per key among
// deferred entries; a live call made after the breaker closed may overtake
// entries still waiting.
//
// # Bounds
//
// Config.MaxEntries and Config.MaxBytes bound each key (waiting and parked
// entries together), so that one broken backend's backlog never refuses
// another's calls; keys come from configuration, so the store's total is
// bounded by keys × MaxBytes. Each entry is bounded too ([MaxPayloadBytes],
// [MaxMetadataBytes] …), and whatever a store hands back is decoded as
// hostile input.
package deadletter
