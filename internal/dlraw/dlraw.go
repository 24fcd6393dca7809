package dlraw

import (
	"context"
	"time"

	"github.com/meshless/meshless/deadletter"
)

// Item is one stored entry, as the store keeps it.
type Item struct {
	// Entry is the decoded entry without its payload, which Scan never
	// reads; when Err is set, only its Pos.
	Entry deadletter.Entry
	// Size is the entry's encoded size in bytes, as its key's bounds count
	// it; PayloadBytes its payload's.
	Size, PayloadBytes int
	// Err says why the entry does not decode (it matches
	// deadletter.ErrInvalidEntry); nil when it does.
	Err error
}

// Store is what a registered store offers beyond [deadletter.Store].
type Store interface {
	// Scan returns up to n (at most deadletter.MaxList) of key's entries in
	// state, oldest first, after position after ("" for the first),
	// readable or not, without their payloads.
	Scan(ctx context.Context, key string, state deadletter.State, after string, n int) ([]Item, error)
	// PurgeAt deletes key's parked entry at position pos, readable or not.
	// It returns an error matching deadletter.ErrNotFound when key has no
	// parked entry there.
	PurgeAt(ctx context.Context, key, pos string) error
	// RequeueAt moves key's parked entry at position pos back to the tail
	// of its waiting entries, as deadletter.Store.Requeue does by ID,
	// without searching the parked entries for it. It returns an error
	// matching deadletter.ErrNotFound when key has no parked entry there,
	// and the entry's decoding error when it does not decode.
	RequeueAt(ctx context.Context, key, pos string, now time.Time) error
}

// of holds the registered stores' adapters; written by inits only.
var of []func(deadletter.Store) Store

// Register adds a store's adapter: f returns nil for a store that is not
// its package's. Called from an init.
func Register(f func(deadletter.Store) Store) { of = append(of, f) }

// Of returns s's raw operations, or nil when s's package offers none.
func Of(s deadletter.Store) Store {
	for _, f := range of {
		if r := f(s); r != nil {
			return r
		}
	}
	return nil
}
