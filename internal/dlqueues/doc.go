// Package dlqueues keeps an engine's dead-letter queues and their stores,
// for the engine's life: one queue per key, made on the key's first call
// that may be deferred (or when the engine starts, for a key whose store
// holds entries of a previous run), on a store shared by every key whose
// section names the same one. A reload keeps a key's queue while its
// settings do not change; new settings get a new queue on the same store.
// What to defer, which keys have a queue and how a deferred call is made
// again are the engine's (internal/engine): this package only keeps the
// queues, kicks their replays and closes them.
package dlqueues
