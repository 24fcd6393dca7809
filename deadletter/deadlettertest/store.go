package deadlettertest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/resilience"
)

// Store is an in-memory [deadletter.Store]: what the durable stores do,
// without the durability. Entries are kept encoded, as the durable stores
// keep them. Leases expire on the clock given to [NewStore]. It is safe for
// concurrent use.
type Store struct {
	clock resilience.Clock

	mu     sync.Mutex
	keys   map[string]*memKey
	seq    uint64
	closed bool
	fail   map[string]error // operation name → error to return once
}

type memKey struct {
	waiting, parked []record
	bytes           int64
	owner           string
	until           time.Time
}

type record struct {
	pos     uint64
	blob    []byte
	replays int
}

var _ deadletter.Store = (*Store)(nil)

// NewStore returns an empty in-memory store whose leases expire on clk (nil:
// the system clock).
func NewStore(clk resilience.Clock) *Store {
	if clk == nil {
		clk = resilience.SystemClock()
	}
	return &Store{clock: clk, keys: map[string]*memKey{}, fail: map[string]error{}}
}

// FailNext makes the next call of operation op ("Append", "Lease", "Next",
// "Ack", "Fail", "Expire", "Stats") return err, for tests of store errors.
func (s *Store) FailNext(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[op] = err
}

// check is called with s.mu held.
func (s *Store) check(op string) error {
	if s.closed {
		return deadletter.ErrClosed
	}
	if err, ok := s.fail[op]; ok {
		delete(s.fail, op)
		return err
	}
	return nil
}

func (s *Store) k(key string) *memKey {
	k := s.keys[key]
	if k == nil {
		k = &memKey{}
		s.keys[key] = k
	}
	return k
}

// Append implements [deadletter.Store].
func (s *Store) Append(_ context.Context, e deadletter.Entry, lim deadletter.Limits) error {
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Append"); err != nil {
		return err
	}
	k := s.k(e.Key)
	if len(k.waiting)+len(k.parked) >= lim.MaxEntries || k.bytes+int64(len(blob)) > lim.MaxBytes {
		return deadletter.ErrFull
	}
	s.seq++
	k.waiting = append(k.waiting, record{pos: s.seq, blob: blob})
	k.bytes += int64(len(blob))
	return nil
}

// Lease implements [deadletter.Store].
func (s *Store) Lease(_ context.Context, key, owner string, ttl time.Duration) (deadletter.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Lease"); err != nil {
		return nil, err
	}
	k := s.k(key)
	now := s.clock.Now()
	if k.owner != "" && k.owner != owner && now.Before(k.until) {
		return nil, deadletter.ErrLeased
	}
	k.owner, k.until = owner, now.Add(ttl)
	return &lease{s: s, key: key, owner: owner, ttl: ttl}, nil
}

type lease struct {
	s          *Store
	key, owner string
	ttl        time.Duration
}

// held is called with s.mu held.
func (l *lease) held(op string) (*memKey, error) {
	if err := l.s.check(op); err != nil {
		return nil, err
	}
	k := l.s.keys[l.key]
	if k == nil || k.owner != l.owner || !l.s.clock.Now().Before(k.until) {
		return nil, deadletter.ErrLeaseLost
	}
	return k, nil
}

func (l *lease) Next(context.Context) (deadletter.Entry, bool, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	k, err := l.held("Next")
	if err != nil {
		return deadletter.Entry{}, false, err
	}
	k.until = l.s.clock.Now().Add(l.ttl)
	if len(k.waiting) == 0 {
		return deadletter.Entry{}, false, nil
	}
	r := k.waiting[0]
	e, err := decode(r)
	if err != nil {
		k.waiting = k.waiting[1:]
		k.bytes -= int64(len(r.blob))
		return deadletter.Entry{}, false, &deadletter.CorruptError{Key: l.key, Pos: e.Pos, Err: err}
	}
	return e, true, nil
}

func decode(r record) (deadletter.Entry, error) {
	e := deadletter.Entry{Pos: pos(r.pos)}
	if err := e.UnmarshalBinary(r.blob); err != nil {
		return e, err
	}
	e.Replays = r.replays
	return e, nil
}

func pos(p uint64) string { return strconv.FormatUint(p, 10) }

// head returns the index of e among k's waiting entries, -1 if absent.
func head(k *memKey, e deadletter.Entry) int {
	return slices.IndexFunc(k.waiting, func(r record) bool { return pos(r.pos) == e.Pos })
}

func (l *lease) remove(op string, e deadletter.Entry) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	k, err := l.held(op)
	if err != nil {
		return err
	}
	if i := head(k, e); i >= 0 {
		k.bytes -= int64(len(k.waiting[i].blob))
		k.waiting = slices.Delete(k.waiting, i, i+1)
	}
	return nil
}

func (l *lease) Ack(_ context.Context, e deadletter.Entry) error    { return l.remove("Ack", e) }
func (l *lease) Expire(_ context.Context, e deadletter.Entry) error { return l.remove("Expire", e) }

func (l *lease) Fail(_ context.Context, e deadletter.Entry, maxReplays int) (int, bool, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	k, err := l.held("Fail")
	if err != nil {
		return 0, false, err
	}
	i := head(k, e)
	if i < 0 {
		return 0, false, nil
	}
	k.waiting[i].replays++
	n := k.waiting[i].replays
	if n < maxReplays {
		return n, false, nil
	}
	r := k.waiting[i]
	k.waiting = slices.Delete(k.waiting, i, i+1)
	l.s.seq++
	r.pos = l.s.seq
	k.parked = append(k.parked, r)
	return n, true, nil
}

func (l *lease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if k := l.s.keys[l.key]; k != nil && k.owner == l.owner {
		k.owner, k.until = "", time.Time{}
	}
	return nil
}

// Stats implements [deadletter.Store].
func (s *Store) Stats(_ context.Context, key string) (deadletter.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Stats"); err != nil {
		return deadletter.Stats{}, err
	}
	k := s.keys[key]
	if k == nil {
		return deadletter.Stats{}, nil
	}
	st := deadletter.Stats{Waiting: len(k.waiting), Parked: len(k.parked), Bytes: k.bytes}
	if len(k.waiting) > 0 {
		if e, err := decode(k.waiting[0]); err == nil {
			st.Oldest = e.Enqueued
		}
	}
	return st, nil
}

// Keys implements [deadletter.Store].
func (s *Store) Keys(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Keys"); err != nil {
		return nil, err
	}
	var keys []string
	for key, k := range s.keys {
		if len(k.waiting)+len(k.parked) > 0 {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys[:min(len(keys), deadletter.MaxKeys)], nil
}

// List implements [deadletter.Store].
func (s *Store) List(_ context.Context, key string, state deadletter.State, after string, n int) ([]deadletter.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("List"); err != nil {
		return nil, err
	}
	k := s.keys[key]
	if k == nil {
		return nil, nil
	}
	recs := k.waiting
	if state == deadletter.Parked {
		recs = k.parked
	}
	var from uint64
	if after != "" {
		p, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return nil, err
		}
		from = p
	}
	var out []deadletter.Entry
	for _, r := range recs {
		if r.pos <= from {
			continue
		}
		if len(out) >= min(n, deadletter.MaxList) {
			break
		}
		if e, err := decode(r); err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *Store) parkedIndex(key, id string) (*memKey, int) {
	k := s.keys[key]
	if k == nil {
		return nil, -1
	}
	return k, slices.IndexFunc(k.parked, func(r record) bool {
		e, err := decode(r)
		return err == nil && e.ID == id
	})
}

// Requeue implements [deadletter.Store].
func (s *Store) Requeue(_ context.Context, key, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Requeue"); err != nil {
		return err
	}
	k, i := s.parkedIndex(key, id)
	if i < 0 {
		return deadletter.ErrNotFound
	}
	e, _ := decode(k.parked[i])
	e.Replays, e.Enqueued = 0, now
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	k.bytes += int64(len(blob) - len(k.parked[i].blob))
	k.parked = slices.Delete(k.parked, i, i+1)
	s.seq++
	k.waiting = append(k.waiting, record{pos: s.seq, blob: blob})
	return nil
}

// Purge implements [deadletter.Store].
func (s *Store) Purge(_ context.Context, key, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check("Purge"); err != nil {
		return err
	}
	k, i := s.parkedIndex(key, id)
	if i < 0 {
		return deadletter.ErrNotFound
	}
	k.bytes -= int64(len(k.parked[i].blob))
	k.parked = slices.Delete(k.parked, i, i+1)
	return nil
}

// Close implements [deadletter.Store].
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Corrupt replaces the encoding of key's oldest waiting entry with garbage,
// as a damaged or hostile store would hand it back.
func (s *Store) Corrupt(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil && len(k.waiting) > 0 {
		k.waiting[0].blob = []byte("not an entry")
	}
}
