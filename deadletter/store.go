package deadletter

import (
	"context"
	"strconv"
	"time"
)

// Store keeps entries durably, by key, in order. Package
// deadletter/boltstore keeps them in a local file, deadletter/redisstore in
// Redis Streams shared by every instance of a client; package
// deadletter/deadlettertest has an in-memory one for tests and
// [deadlettertest.TestStore], the contract every Store passes.
//
// Each key holds two ordered sets: waiting entries (replayed oldest first)
// and parked ones (set aside after too many failed replays, until an
// operator requeues or purges them). Everything a store reads back it
// treats as hostile: an entry it cannot decode is dropped and reported
// ([CorruptError]), never returned half-read.
//
// Implementations must be safe for concurrent use.
type Store interface {
	// Append adds e at the tail of e.Key's waiting entries. When it returns
	// nil, e is durable: it survives a crash of this process (and of the
	// store's server, configured as the store's documentation says). When
	// the key already holds lim.MaxEntries entries, or e would take its
	// bytes past lim.MaxBytes (waiting and parked together), it returns an
	// error matching [ErrFull] and keeps nothing: the check and the append
	// are one atomic step.
	Append(ctx context.Context, e Entry, lim Limits) error
	// Lease takes the exclusive right to replay key's waiting entries, for
	// ttl at least (renewed by each [Lease.Next]). It returns an error
	// matching [ErrLeased] while another holder has it. owner names the
	// holder: unique per queue.
	Lease(ctx context.Context, key, owner string, ttl time.Duration) (Lease, error)
	// Stats returns key's figures.
	Stats(ctx context.Context, key string) (Stats, error)
	// Keys returns the keys that hold entries or held some, sorted, at most
	// [MaxKeys].
	Keys(ctx context.Context) ([]string, error)
	// List returns up to n of key's entries in state, oldest first,
	// starting after position after ("" for the first).
	List(ctx context.Context, key string, state State, after string, n int) ([]Entry, error)
	// Requeue moves the parked entry id of key to the tail of its waiting
	// entries, its failed replays reset to zero and Enqueued set to now.
	// It returns an error matching [ErrNotFound] when no parked entry of
	// key has that ID.
	Requeue(ctx context.Context, key, id string, now time.Time) error
	// Purge deletes the parked entry id of key ([ErrNotFound] if none).
	Purge(ctx context.Context, key, id string) error
	// Close releases the store; leases still held are lost, and every later
	// call returns an error matching [ErrClosed]. Close is idempotent.
	Close() error
}

// Lease is one holder's exclusive right to replay a key's waiting entries,
// from the head. Every method but Release returns an error matching
// [ErrLeaseLost] when the lease has expired: then the entry was left as it
// was, for the next holder. A Lease is used by one goroutine at a time.
type Lease interface {
	// Next returns the oldest waiting entry, and false when there is none.
	// Until Ack, Fail or Expire removes it, Next returns the same entry. It
	// renews the lease for its ttl.
	Next(ctx context.Context) (Entry, bool, error)
	// Ack removes e: it was replayed.
	Ack(ctx context.Context, e Entry) error
	// Fail counts a failed replay of e. When e's failed replays reach
	// maxReplays, e is parked (parked is true); otherwise it stays at the
	// head. It returns e's failed replays now.
	Fail(ctx context.Context, e Entry, maxReplays int) (replays int, parked bool, err error)
	// Expire removes e: it was too old to replay.
	Expire(ctx context.Context, e Entry) error
	// Release gives the lease back. The lease is released on every path:
	// call it with defer.
	Release(ctx context.Context) error
}

// State is where an entry stands in its key's queue.
type State uint8

const (
	// Waiting entries are replayed, oldest first.
	Waiting State = iota
	// Parked entries failed MaxReplays replays; they wait for an operator.
	Parked
)

// String returns "waiting" or "parked".
func (s State) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Parked:
		return "parked"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Stats are a key's figures in a store.
type Stats struct {
	// Waiting and Parked count the key's entries in each state.
	Waiting, Parked int
	// Bytes is the encoded size of all of them.
	Bytes int64
	// Oldest is when the oldest waiting entry was enqueued; zero when none
	// waits.
	Oldest time.Time
}

// MaxKeys bounds the keys a store lists ([Store.Keys]).
const MaxKeys = 10_000

// MaxList bounds the entries one [Store.List] call returns.
const MaxList = 1000
