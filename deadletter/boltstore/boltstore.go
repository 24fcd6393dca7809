package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlhead"
)

// LockTimeout is how long Open waits for the file's lock, held by another
// process, before it fails.
const LockTimeout = time.Second

// Names inside the file: a root bucket, one bucket per key, and in each the
// waiting and parked entries (by sequence number) and three counters.
var (
	rootName    = []byte("meshless-deadletter/v1")
	waitingName = []byte("w")
	parkedName  = []byte("p")
	nWaiting    = []byte("nw")
	nParked     = []byte("np")
	nBytes      = []byte("nb")
)

// Store is a [deadletter.Store] in a bbolt file. It is safe for concurrent
// use.
type Store struct {
	f      *file
	closed atomic.Bool
}

// file is one open bbolt file, shared by every Store of the process that
// opened its path.
type file struct {
	path string // the canonical path: the registry's key
	db   *bolt.DB
	refs int // guarded by registry.mu

	mu     sync.Mutex
	leases map[string]*lease // key → the lease held on it
}

// registry keeps the files this process has open, so that opening one path
// twice shares the file rather than waiting on bbolt's lock, which the
// process itself holds.
var registry = struct {
	mu    sync.Mutex
	files map[string]*file
}{files: map[string]*file{}}

var _ deadletter.Store = (*Store)(nil)

// Open opens (or creates, mode 0600) the bbolt file at path. Opening a path
// this process already has open returns another handle on the same file;
// the file closes with its last handle. A file that another process holds
// (a running service, while an operator's command tries it) is an error
// after [LockTimeout], never a wait without end. A bbolt file that holds
// other buckets but not the store's (another program's, or a newer
// version's) is an error, and is left as it was.
func Open(path string) (*Store, error) {
	key, err := canonical(path)
	if err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if f := registry.files[key]; f != nil {
		f.refs++
		return &Store{f: f}, nil
	}
	db, err := openFile(path)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: %s is locked by another process (a running service holds it; stop it, or use its Go API): %w", path, err)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("boltstore: %w", err) // names the file already
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(rootName) != nil {
			return nil
		}
		// A file that holds buckets but not ours is another program's, or
		// a newer version's: never written into.
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			return fmt.Errorf("not a dead-letter store: it holds bucket %q, not %q (another program's file, or a newer version's)", name, rootName)
		}); err != nil {
			return err
		}
		_, err := tx.CreateBucket(rootName)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: %s: %w", path, err)
	}
	f := &file{path: key, db: db, refs: 1, leases: map[string]*lease{}}
	registry.files[key] = f
	return &Store{f: f}, nil
}

// openFile opens the bbolt file at path; a damaged file is an error, not
// a panic (see damaged).
func openFile(path string) (db *bolt.DB, err error) {
	defer damaged(path, &err)()
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: LockTimeout})
}

// damaged returns what a call into bbolt defers so that a damaged file
// (bbolt panics on the pages it finds inconsistent, and a truncated file
// faults the memory it maps) is an error that names it, set in *err, not
// a panic that ends the process: faults become panics for the call
// (debug.SetPanicOnFault), and the panic is recovered.
func damaged(path string, err *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			*err = fmt.Errorf("boltstore: %s is damaged (restore it, or move it away to start afresh): %v", path, p)
		}
	}
}

// canonical returns path absolute, with the symbolic links of its
// directory (and of the file, if it exists) resolved.
func canonical(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p, nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.f.path }

// Close releases this handle: its leases are lost, and the file closes with
// its last handle. Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.f.mu.Lock()
	for key, l := range s.f.leases {
		if l.s == s {
			delete(s.f.leases, key)
		}
	}
	s.f.mu.Unlock()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	s.f.refs--
	if s.f.refs > 0 {
		return nil
	}
	delete(registry.files, s.f.path)
	return s.f.db.Close()
}

func (s *Store) update(fn func(root *bolt.Bucket) error) (err error) {
	if s.closed.Load() {
		return deadletter.ErrClosed
	}
	defer damaged(s.f.path, &err)()
	return s.f.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(rootName)) })
}

func (s *Store) view(fn func(root *bolt.Bucket) error) (err error) {
	if s.closed.Load() {
		return deadletter.ErrClosed
	}
	defer damaged(s.f.path, &err)()
	return s.f.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(rootName)
		if root == nil {
			return errors.New("boltstore: the file has no dead-letter bucket")
		}
		return fn(root)
	})
}

// keyBucket is one key's bucket in a transaction.
type keyBucket struct {
	b               *bolt.Bucket
	waiting, parked *bolt.Bucket
	nw, np, bytes   int64
}

// openKey returns key's bucket, or nil when it does not exist and create is
// false.
func openKey(root *bolt.Bucket, key string, create bool) (*keyBucket, error) {
	var b *bolt.Bucket
	if create {
		var err error
		if b, err = root.CreateBucketIfNotExists([]byte(key)); err != nil {
			return nil, err
		}
		if _, err := b.CreateBucketIfNotExists(waitingName); err != nil {
			return nil, err
		}
		if _, err := b.CreateBucketIfNotExists(parkedName); err != nil {
			return nil, err
		}
	} else if b = root.Bucket([]byte(key)); b == nil {
		return nil, nil
	}
	k := &keyBucket{b: b, waiting: b.Bucket(waitingName), parked: b.Bucket(parkedName)}
	if k.waiting == nil || k.parked == nil {
		return nil, fmt.Errorf("boltstore: key %q: its bucket is damaged", key)
	}
	var ok1, ok2, ok3 bool
	k.nw, ok1 = counter(b.Get(nWaiting))
	k.np, ok2 = counter(b.Get(nParked))
	k.bytes, ok3 = counter(b.Get(nBytes))
	if !ok1 || !ok2 || !ok3 || !k.plausible() {
		k.recount()
	}
	return k, nil
}

// plausible reports whether the counters can be the entries': within the
// bounds of any configuration and of the entries' encoded sizes, and zero
// exactly when their state holds no entry. Well-formed counters that the
// entries deny (a hostile file's, or ones that drifted) would otherwise
// be trusted for good: a key full forever, gauges that say 2^40. A check
// of each bucket's first entry, not a count: counters that are high but
// plausible are rebuilt, at the latest, when their state empties.
func (k *keyBucket) plausible() bool {
	n := k.nw + k.np
	if k.nw > deadletter.MaxMaxEntries || k.np > deadletter.MaxMaxEntries ||
		k.bytes > deadletter.MaxMaxBytes || k.bytes > n*maxEntryBytes {
		return false
	}
	w, _ := k.waiting.Cursor().First()
	p, _ := k.parked.Cursor().First()
	return (k.nw == 0) == (w == nil) && (k.np == 0) == (p == nil)
}

// maxEntryBytes bounds one encoded entry: above the sum of an entry's
// bounds (package deadletter's Max... constants).
const maxEntryBytes = 17 << 20

func counter(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	n := int64(binary.BigEndian.Uint64(v))
	return n, n >= 0
}

// recount rebuilds counters that are missing or damaged from the entries.
func (k *keyBucket) recount() {
	k.nw, k.np, k.bytes = 0, 0, 0
	_ = k.waiting.ForEach(func(_, v []byte) error { k.nw++; k.bytes += int64(len(v)); return nil })
	_ = k.parked.ForEach(func(_, v []byte) error { k.np++; k.bytes += int64(len(v)); return nil })
}

// save writes the counters back (in a writable transaction). bbolt keeps
// the value slices until the commit: each gets its own.
func (k *keyBucket) save() error {
	for _, c := range []struct {
		name []byte
		v    int64
	}{{nWaiting, k.nw}, {nParked, k.np}, {nBytes, k.bytes}} {
		v := binary.BigEndian.AppendUint64(nil, uint64(max(c.v, 0)))
		err := k.b.Put(c.name, v)
		if errors.Is(err, bolterrors.ErrIncompatibleValue) {
			// A hostile file's bucket under a counter's name: replaced, or
			// no entry of the key could ever be removed.
			if err = k.b.DeleteBucket(c.name); err == nil {
				err = k.b.Put(c.name, v)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// nextSeq returns the key's next sequence number, past every entry's in
// either state whatever the bucket's sequence says: a hostile or damaged
// file's can be behind its entries (a Put at an entry's number replaces
// it) or at its maximum (the next one wraps to 0, before every entry).
func (k *keyBucket) nextSeq() (uint64, error) {
	last := uint64(0)
	for _, b := range []*bolt.Bucket{k.waiting, k.parked} {
		c := b.Cursor()
		ck, _ := c.Last()
		for ck != nil && len(ck) != 8 { // a hostile file's key: no number
			ck, _ = c.Prev()
		}
		if ck != nil {
			last = max(last, binary.BigEndian.Uint64(ck))
		}
	}
	if last == math.MaxUint64 {
		return 0, errors.New("boltstore: the key's entries hold the last sequence number")
	}
	seq := k.b.Sequence()
	if seq <= last || seq == math.MaxUint64 {
		seq = last
	}
	seq++
	return seq, k.b.SetSequence(seq)
}

func pos(k []byte) string {
	if len(k) != 8 {
		return "bad:" + strconv.Quote(string(k))
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(k), 10)
}

func parsePos(p string) ([]byte, error) {
	if q, ok := strings.CutPrefix(p, "bad:"); ok { // what pos says of a hostile file's key
		if k, err := strconv.Unquote(q); err == nil && len(k) != 8 {
			return []byte(k), nil
		}
	}
	n, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("boltstore: position %q: %w", p, err)
	}
	return seqKey(n), nil
}

// decode reads an entry stored at k in key's bucket, with v its encoding.
// An entry under a key that is no sequence number (a hostile file's) is
// corrupt: it could never be acknowledged, and would be replayed at every
// round. So is one that names another key than the bucket it is read from
// (a damaged or hand-edited file): replayed, it would reach the handler
// under another key's identity.
func decode(key string, k, v []byte) (deadletter.Entry, error) {
	e := deadletter.Entry{Pos: pos(k)}
	if len(k) != 8 {
		return e, errors.New("boltstore: an entry under a key that is no sequence number")
	}
	if err := e.UnmarshalBinary(v); err != nil {
		return e, err
	}
	return e, checkOwner(key, e)
}

// decodeHead is decode without the payload, whose length it returns: the
// payload's pages of the file are never read.
func decodeHead(key string, k, v []byte) (deadletter.Entry, int, error) {
	e := deadletter.Entry{Pos: pos(k)}
	if len(k) != 8 {
		return e, 0, errors.New("boltstore: an entry under a key that is no sequence number")
	}
	n, _, err := dlhead.Decode(v, len(v), &e) // never short: v is all of it
	if err != nil {
		return e, 0, err
	}
	return e, n, checkOwner(key, e)
}

// checkOwner reports an entry that names another key than key, the one it
// was read under.
func checkOwner(key string, e deadletter.Entry) error {
	if e.Key != key {
		return fmt.Errorf("%w: the entry at %s of key %q names key %q", deadletter.ErrInvalidEntry, e.Pos, key, e.Key)
	}
	return nil
}

// Append implements [deadletter.Store]: the entry is on disk (fdatasync)
// when it returns nil.
func (s *Store) Append(_ context.Context, e deadletter.Entry, lim deadletter.Limits) error {
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	return s.update(func(root *bolt.Bucket) error {
		k, err := openKey(root, e.Key, true)
		if err != nil {
			return err
		}
		if k.nw+k.np >= int64(lim.MaxEntries) || k.bytes+int64(len(blob)) > lim.MaxBytes {
			return deadletter.ErrFull
		}
		seq, err := k.nextSeq()
		if err != nil {
			return err
		}
		if err := k.waiting.Put(seqKey(seq), blob); err != nil {
			return err
		}
		k.nw++
		k.bytes += int64(len(blob))
		return k.save()
	})
}

// Stats implements [deadletter.Store].
func (s *Store) Stats(_ context.Context, key string) (deadletter.Stats, error) {
	var st deadletter.Stats
	err := s.view(func(root *bolt.Bucket) error {
		k, err := openKey(root, key, false)
		if k == nil || err != nil {
			return err
		}
		st = deadletter.Stats{Waiting: int(k.nw), Parked: int(k.np), Bytes: k.bytes}
		if ck, v := k.waiting.Cursor().First(); ck != nil {
			if e, _, err := decodeHead(key, ck, v); err == nil {
				st.Oldest = e.Enqueued
			}
		}
		return nil
	})
	return st, err
}

// Keys implements [deadletter.Store].
func (s *Store) Keys(context.Context) ([]string, error) {
	var keys []string
	err := s.view(func(root *bolt.Bucket) error {
		return root.ForEachBucket(func(name []byte) error {
			key := string(name)
			if len(keys) >= deadletter.MaxKeys || deadletter.CheckKey(key) != nil {
				return nil
			}
			if k, err := openKey(root, key, false); err == nil && k != nil && k.nw+k.np > 0 {
				keys = append(keys, key)
			}
			return nil
		})
	})
	return keys, err // bbolt iterates in byte order: sorted
}

// List implements [deadletter.Store]. Entries that do not decode are
// skipped.
func (s *Store) List(_ context.Context, key string, state deadletter.State, after string, n int) ([]deadletter.Entry, error) {
	var from []byte
	if after != "" {
		var err error
		if from, err = parsePos(after); err != nil {
			return nil, err
		}
	}
	n = min(n, deadletter.MaxList)
	var out []deadletter.Entry
	err := s.view(func(root *bolt.Bucket) error {
		k, err := openKey(root, key, false)
		if k == nil || err != nil {
			return err
		}
		b := k.waiting
		if state == deadletter.Parked {
			b = k.parked
		}
		c := b.Cursor()
		ck, v := c.First()
		if from != nil {
			ck, v = c.Seek(from)
			if ck != nil && string(ck) == string(from) {
				ck, v = c.Next()
			}
		}
		for ; ck != nil && len(out) < n; ck, v = c.Next() {
			if e, err := decode(key, ck, v); err == nil {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// findParked returns the sequence key of key's parked entry id, and the
// entry: the others' payloads are never read.
func findParked(key string, k *keyBucket, id string) ([]byte, deadletter.Entry, bool) {
	c := k.parked.Cursor()
	for ck, v := c.First(); ck != nil; ck, v = c.Next() {
		if h, _, err := decodeHead(key, ck, v); err != nil || h.ID != id {
			continue
		}
		if e, err := decode(key, ck, v); err == nil {
			return append([]byte(nil), ck...), e, true
		}
	}
	return nil, deadletter.Entry{}, false
}

// Requeue implements [deadletter.Store].
func (s *Store) Requeue(_ context.Context, key, id string, now time.Time) error {
	return s.updateKey(key, func(k *keyBucket) error {
		pk, e, ok := findParked(key, k, id)
		if !ok {
			return deadletter.ErrNotFound
		}
		return requeue(k, pk, e, now)
	})
}

// requeue moves e, k's parked entry at pk, back to the tail of its
// waiting entries.
func requeue(k *keyBucket, pk []byte, e deadletter.Entry, now time.Time) error {
	old := len(k.parked.Get(pk))
	e.Replays, e.Enqueued = 0, now
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	seq, err := k.nextSeq()
	if err != nil {
		return err
	}
	if err := k.parked.Delete(pk); err != nil {
		return err
	}
	if err := k.waiting.Put(seqKey(seq), blob); err != nil {
		return err
	}
	k.np--
	k.nw++
	k.bytes += int64(len(blob) - old)
	return k.save()
}

// updateKey runs f on key's buckets in a write transaction; a key the file
// does not hold is deadletter.ErrNotFound.
func (s *Store) updateKey(key string, f func(k *keyBucket) error) error {
	return s.update(func(root *bolt.Bucket) error {
		k, err := openKey(root, key, false)
		if err != nil {
			return err
		}
		if k == nil {
			return deadletter.ErrNotFound
		}
		return f(k)
	})
}

// Purge implements [deadletter.Store].
func (s *Store) Purge(_ context.Context, key, id string) error {
	return s.updateKey(key, func(k *keyBucket) error {
		pk, _, ok := findParked(key, k, id)
		if !ok {
			return deadletter.ErrNotFound
		}
		size := len(k.parked.Get(pk))
		if err := k.parked.Delete(pk); err != nil {
			return err
		}
		k.np--
		k.bytes -= int64(size)
		return k.save()
	})
}
