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
type methodTable struct {
	snap    atomic.Pointer[map[string]*Method]
	pending map[string]*Method // under Engine.mu
	n       int                // entries in snap and pending, under Engine.mu
	copied  int                // entries copied into new snapshots, under Engine.mu
	misses  int                // lookups found in pending since the last fold, under Engine.mu
}

func newMethodTable() *methodTable {
	t := &methodTable{pending: map[string]*Method{}}
	empty := map[string]*Method{}
	t.snap.Store(&empty)
	return t
}

// load returns the entry of key from the snapshot.
func (t *methodTable) load(key string) (*Method, bool) {
	m, ok := (*t.snap.Load())[key]
	return m, ok
}

// loadLocked looks in the snapshot and the pending map. Called with
// Engine.mu held.
func (t *methodTable) loadLocked(key string) (*Method, bool) {
	if m, ok := t.load(key); ok {
		return m, true
	}
	m, ok := t.pending[key]
	if ok {
		if t.misses++; t.misses > len(*t.snap.Load()) {
			t.fold()
		}
	}
	return m, ok
}

// storeLocked adds an entry. Called with Engine.mu held.
func (t *methodTable) storeLocked(key string, m *Method) {
	t.pending[key] = m
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
	next := make(map[string]*Method, len(snap)+len(t.pending))
	for k, v := range snap {
		next[k] = v
	}
	for k, v := range t.pending {
		next[k] = v
	}
	t.copied += len(next)
	t.snap.Store(&next)
	t.pending = map[string]*Method{}
	t.misses = 0
}
