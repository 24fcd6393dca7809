package engine

import "sync/atomic"

// Other is the name under which the engine keeps the policies of every key
// it does not know: a name the configuration does not write and the
// transport cannot vouch for (one a remote client invented), and every key
// past the engine's bound. Such a call runs with the policies of its group's
// entry when the configuration names its group ("pkg.Svc/_OTHER"), else
// with the defaults' ("_OTHER/_OTHER"); it never creates state of its own,
// and never runs without policies.
const Other = "_OTHER"

// methodTable maps full method names to their policy sets. Reads take no
// lock and allocate nothing once a method is in the snapshot. New entries go
// to a small pending map under a lock, and are folded into a new snapshot
// when the pending map has grown as large as the snapshot: building a table
// of n methods costs O(n) map writes in all, not O(n²). A pending entry that
// calls keep finding (a table of a few methods, whose last ones stay
// pending) is folded in too once the lookups that took the lock for it
// outnumber the snapshot's entries: the fold's cost is then paid by as many
// locked lookups, and every later one takes no lock.
//
// In front of the snapshot, hot holds the entries of up to hotSlots keys,
// one per slot, chosen by a hash of a key's last bytes: a read there is one
// atomic load and one string comparison (equal strings at the same address,
// a generated method name, compare without reading them). A slot is filled
// once, by the first snapshot read of a key that maps to it, and never
// replaced: a key whose slot another holds reads the snapshot every time,
// and the per-call path never writes to memory shared between calls.
type methodTable struct {
	snap    atomic.Pointer[map[string]*tableEntry]
	hot     [hotSlots]atomic.Pointer[tableEntry]
	pending map[string]*tableEntry // under Engine.mu
	n       int                    // entries in snap and pending, under Engine.mu
	copied  int                    // entries copied into new snapshots, under Engine.mu
	misses  int                    // lookups found in pending since the last fold, under Engine.mu
}

// tableEntry is one key's entry, made once when the key is stored.
type tableEntry struct {
	key string
	m   *Method
}

// hotSlots is the size of a table's hot cache (a power of two).
const (
	hotBits  = 6
	hotSlots = 1 << hotBits
)

func newMethodTable() *methodTable {
	t := &methodTable{pending: map[string]*tableEntry{}}
	empty := map[string]*tableEntry{}
	t.snap.Store(&empty)
	return t
}

// loadSnap returns the entry of key from the snapshot, and puts it in the
// hot cache when its slot is free.
func (t *methodTable) loadSnap(key string) (*Method, bool) {
	e, ok := (*t.snap.Load())[key]
	if !ok {
		return nil, false
	}
	if h := &t.hot[hotIndex(key)]; h.Load() == nil {
		h.CompareAndSwap(nil, e)
	}
	return e.m, true
}

// loadLocked looks in the snapshot and the pending map. Called with
// Engine.mu held.
func (t *methodTable) loadLocked(key string) (*Method, bool) {
	if m, ok := t.load(key); ok {
		return m, true
	}
	e, ok := t.pending[key]
	if !ok {
		return nil, false
	}
	if t.misses++; t.misses > len(*t.snap.Load()) {
		t.fold()
	}
	return e.m, true
}

// storeLocked adds an entry. Called with Engine.mu held.
func (t *methodTable) storeLocked(key string, m *Method) {
	t.pending[key] = &tableEntry{key: key, m: m}
	t.n++
	if len(t.pending) < max(len(*t.snap.Load()), 16) {
		return
	}
	t.fold()
}

// fold makes the pending entries part of a new snapshot. Called with
// Engine.mu held.
func (t *methodTable) fold() {
	snap := *t.snap.Load()
	next := make(map[string]*tableEntry, len(snap)+len(t.pending))
	for k, v := range snap {
		next[k] = v
	}
	for k, v := range t.pending {
		next[k] = v
	}
	t.copied += len(next)
	t.snap.Store(&next)
	t.pending = map[string]*tableEntry{}
	t.misses = 0
}
