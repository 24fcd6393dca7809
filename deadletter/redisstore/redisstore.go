package redisstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlns"
	"github.com/meshless/meshless/internal/opterr"
)

// DefaultNamespace prefixes every key unless [WithNamespace] says otherwise.
const DefaultNamespace = "meshless"

// maxLeaseTTL bounds a lease that another holder set: a longer one (or one
// without a TTL) is not a holder's, and is taken over.
const maxLeaseTTL = 3 * time.Hour

// scanPage is how many parked entries one XRANGE reads when looking for an
// ID.
const scanPage = 500

// Store is a [deadletter.Store] in Redis Streams. It is safe for concurrent
// use; every instance of a client that uses the same namespace shares its
// entries.
type Store struct {
	rdb    redis.UniversalClient
	ns     string
	closed atomic.Bool
	known  sync.Map // keys already added to the key set
}

var _ deadletter.Store = (*Store)(nil)

// Option configures a [Store].
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithNamespace sets the prefix of every key: every instance of one client
// uses the same. Default [DefaultNamespace]. At most 128 bytes, printable
// ASCII without spaces or braces.
func WithNamespace(ns string) Option { return optionFunc(func(s *Store) { s.ns = ns }) }

// New returns a store that keeps its entries through rdb (the client
// cluster mode uses, or one of its own). The client stays the caller's:
// Close does not close it.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	s := &Store{rdb: rdb, ns: DefaultNamespace}
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	var errs opterr.Errors
	if rdb == nil {
		errs.Add("redis", nil, "must not be nil")
	}
	if !dlns.Check(s.ns) {
		errs.Add("namespace", s.ns, dlns.Problem)
	}
	if err := errs.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return s, nil
}

// keys are the Redis keys of one dead-letter key, in the order the scripts
// take them: w p m l.
type keys [4]string

// keysOf returns key's Redis keys: ns:dl:{key}:w and the like, one hash
// tag (so one Redis Cluster slot) for the four. A name that starts with
// "}" would make that tag empty (Redis then hashes each key whole, and the
// scripts fail with CROSSSLOT): its keys are ns:dl:}{hex of the name}:w
// and the like instead. No other name's keys can be those: every other
// name's keys have no "}" before their first "{" (a namespace holds no
// brace). Braces elsewhere in a name leave a tag, the text before the
// first "}", common to its four keys.
func (s *Store) keysOf(key string) keys {
	base := s.ns + ":dl:{" + key + "}:"
	if strings.HasPrefix(key, "}") {
		base = s.ns + ":dl:}{" + hex.EncodeToString([]byte(key)) + "}:"
	}
	return keys{base + "w", base + "p", base + "m", base + "l"}
}

func (s *Store) keySet() string { return s.ns + ":dl:keys" }

func (s *Store) check(key string) error {
	if s.closed.Load() {
		return deadletter.ErrClosed
	}
	return deadletter.CheckKey(key)
}

// Close marks the store closed; every later call returns ErrClosed. Leases
// held expire on their TTL. The client is not closed. Close is idempotent.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// Append implements [deadletter.Store]: when it returns nil, Redis has
// acknowledged the entry — durable across a crash of redis-server when the
// server runs with appendonly yes and appendfsync always.
func (s *Store) Append(ctx context.Context, e deadletter.Entry, lim deadletter.Limits) error {
	if err := s.check(e.Key); err != nil {
		return err
	}
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	k := s.keysOf(e.Key)
	res, err := appendScript.Run(ctx, s.rdb, k[:3], blob, lim.MaxEntries, lim.MaxBytes).Result()
	if err != nil {
		return fmt.Errorf("redisstore: append: %w", err)
	}
	if n, ok := res.(int64); ok && n == 0 {
		return deadletter.ErrFull
	}
	// The key set is written beside the streams (another slot in Redis
	// Cluster), once per key and process; again when the key's streams
	// were empty, since the set may have gone with them (Redis restarted
	// without its data, flushed, a replica promoted without the last
	// writes).
	first := false
	if parts, ok := res.([]any); ok && len(parts) == 2 {
		n, _ := parts[1].(int64)
		first = n == 0
	}
	if _, ok := s.known.Load(e.Key); !ok || first {
		if err := addKeyScript.Run(ctx, s.rdb, []string{s.keySet()}, e.Key).Err(); err == nil {
			s.known.Store(e.Key, true)
		}
	}
	return nil
}

var streamID = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

func checkPos(p string) error {
	if !streamID.MatchString(p) {
		return fmt.Errorf("redisstore: %q is not a stream ID", p)
	}
	return nil
}

// decode turns a stream entry's fields into an Entry; failed is the count
// of failed replays kept beside it.
func decode(key, id string, fields map[string]any, failed any) (deadletter.Entry, error) {
	e := deadletter.Entry{Pos: id}
	b, ok := fields["e"].(string)
	if !ok {
		return e, fmt.Errorf("%w: stream entry %s has no entry field", deadletter.ErrInvalidEntry, id)
	}
	if err := e.UnmarshalBinary([]byte(b)); err != nil {
		return e, err
	}
	if e.Key != key {
		return e, fmt.Errorf("%w: stream entry %s belongs to key %q", deadletter.ErrInvalidEntry, id, e.Key)
	}
	e.Replays = count(failed)
	return e, nil
}

// count reads a hostile counter: a non-negative integer, bounded; anything
// else is zero.
func count(v any) int {
	var n int64
	switch v := v.(type) {
	case string:
		n, _ = strconv.ParseInt(v, 10, 64)
	case int64:
		n = v
	}
	return int(min(max(n, 0), 1<<30))
}

func fieldMap(v any) map[string]any {
	list, _ := v.([]any)
	m := make(map[string]any, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		if k, ok := list[i].(string); ok {
			m[k] = list[i+1]
		}
	}
	return m
}

// Stats implements [deadletter.Store].
func (s *Store) Stats(ctx context.Context, key string) (deadletter.Stats, error) {
	if err := s.check(key); err != nil {
		return deadletter.Stats{}, err
	}
	k := s.keysOf(key)
	res, err := statsScript.Run(ctx, s.rdb, k[:3]).Slice()
	if err != nil {
		return deadletter.Stats{}, fmt.Errorf("redisstore: stats: %w", err)
	}
	if len(res) != 3 {
		return deadletter.Stats{}, fmt.Errorf("redisstore: stats: unexpected reply %v", res)
	}
	nw, _ := res[0].(int64)
	np, _ := res[1].(int64)
	nb, _ := res[2].(string)
	st := deadletter.Stats{Waiting: int(max(nw, 0)), Parked: int(max(np, 0))}
	st.Bytes, _ = strconv.ParseInt(nb, 10, 64)
	st.Bytes = max(st.Bytes, 0)
	if st.Waiting > 0 {
		// The oldest entry's head only: the head of the stream may be
		// a hostile blob of any size.
		hs, err := s.heads(ctx, key, k[0], "-", 1, "")
		if err != nil {
			return deadletter.Stats{}, fmt.Errorf("redisstore: stats: %w", err)
		}
		if len(hs) == 1 && hs[0].err == nil {
			st.Oldest = hs[0].e.Enqueued
		}
	}
	return st, nil
}

// Keys implements [deadletter.Store]: the keys any instance appended to,
// from a set kept beside the streams; names that are not valid keys are
// skipped.
func (s *Store) Keys(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, deadletter.ErrClosed
	}
	var out []string
	var cursor uint64
	for range 1000 { // bounded: at most 1000 pages
		page, next, err := s.keysPage(ctx, cursor)
		if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
			// Not a set (hostile): no key is known. It is replaced by
			// the next deferral of each key (this process's, at once).
			if err = dropForeignScript.Run(ctx, s.rdb, []string{s.keySet()}, "set").Err(); err == nil {
				s.known.Clear()
				return nil, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("redisstore: keys: %w", err)
		}
		for _, k := range page {
			if deadletter.CheckKey(k) == nil && len(out) < deadletter.MaxKeys {
				out = append(out, k)
			}
		}
		if cursor = next; cursor == 0 || len(out) >= deadletter.MaxKeys {
			break
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// keysPage reads one page of the key set from cursor: the names of at most
// MaxKeyBytes (a longer one is no key, and stays in Redis).
func (s *Store) keysPage(ctx context.Context, cursor uint64) ([]string, uint64, error) {
	res, err := keysScript.Run(ctx, s.rdb, []string{s.keySet()}, cursor, deadletter.MaxKeyBytes).Slice()
	if err != nil {
		return nil, 0, err
	}
	var next uint64
	var page []any
	if len(res) == 2 {
		c, _ := res[0].(string)
		next, err = strconv.ParseUint(c, 10, 64)
		page, _ = res[1].([]any)
	}
	if len(res) != 2 || err != nil {
		return nil, 0, fmt.Errorf("unexpected reply %v", res)
	}
	out := make([]string, 0, len(page))
	for _, k := range page {
		if k, ok := k.(string); ok {
			out = append(out, k)
		}
	}
	return out, next, nil
}

// List implements [deadletter.Store]. Stream entries that do not decode
// are skipped, however many: the page is filled from the entries behind
// them, so that a short page still means the end (a caller pages on until
// one is short). It reads the entries' heads first (at most headPrefix
// bytes each, never an unreadable entry's payload), then the readable ones
// it returns, whole. At most maxListScan entries a call: past them, an
// error that says so, never a short page.
func (s *Store) List(ctx context.Context, key string, state deadletter.State, after string, n int) ([]deadletter.Entry, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	from := "-"
	if after != "" {
		if err := checkPos(after); err != nil {
			return nil, err
		}
		from = "(" + after
	}
	k := s.keysOf(key)
	stream, m := k[0], k[2]
	if state == deadletter.Parked {
		stream, m = k[1], ""
	}
	n = min(max(n, 0), deadletter.MaxList)
	out := make([]deadletter.Entry, 0, n)
	page := 0
	for scanned := 0; len(out) < n; {
		if scanned >= maxListScan {
			return nil, fmt.Errorf("redisstore: list: key %q: more than %d %s entries in a row after %s do not decode (meshless-deadletter list shows them)",
				key, maxListScan, state, strings.TrimPrefix(from, "("))
		}
		want := n - len(out)
		page = min(max(want, 2*page), scanPage)
		hs, err := s.heads(ctx, key, stream, from, page, m)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %w", err)
		}
		// The readable heads up to the want-th, then those entries whole,
		// in one round trip.
		var take []head
		used := len(hs)
		for i, h := range hs {
			if h.err == nil {
				take = append(take, h)
			}
			if len(take) == want {
				used = i + 1
				break
			}
		}
		es, err := s.fetch(ctx, key, stream, m, take)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %w", err)
		}
		out = append(out, es...)
		if used == len(hs) && len(hs) < page { // the stream's end
			break
		}
		scanned += used
		from = "(" + hs[used-1].e.Pos
	}
	return out, nil
}

// maxListScan bounds the stream entries one List reads: what any key can
// hold ([deadletter.MaxMaxEntries]), read a head at a time.
const maxListScan = deadletter.MaxMaxEntries

// fetch reads the entries of hs whole from stream, those that are still
// there and decode, in order; failed replays as heads reads them (from m,
// when it is not "").
func (s *Store) fetch(ctx context.Context, key, stream, m string, hs []head) ([]deadletter.Entry, error) {
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.e.Pos
	}
	ws, err := s.whole(ctx, stream, m, ids)
	if err != nil {
		return nil, err
	}
	out := make([]deadletter.Entry, 0, len(ws))
	for _, w := range ws {
		if e, err := w.decode(key); err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// findParked returns the stream entry of key's parked entry id, reading
// the others' heads only (never their payloads).
func (s *Store) findParked(ctx context.Context, key, id string) (deadletter.Entry, error) {
	k := s.keysOf(key)
	from := "-"
	for range deadletter.MaxMaxEntries/scanPage + 1 {
		hs, err := s.heads(ctx, key, k[1], from, scanPage, "")
		if err != nil {
			return deadletter.Entry{}, err
		}
		for _, h := range hs {
			if h.err != nil || h.e.ID != id {
				continue
			}
			ws, err := s.whole(ctx, k[1], "", []string{h.e.Pos})
			if err != nil {
				return deadletter.Entry{}, fmt.Errorf("redisstore: %w", err)
			}
			if len(ws) == 1 {
				if e, err := ws[0].decode(key); err == nil && e.ID == id {
					return e, nil
				}
			}
		}
		if len(hs) < scanPage {
			break
		}
		from = "(" + hs[len(hs)-1].e.Pos
	}
	return deadletter.Entry{}, deadletter.ErrNotFound
}

// Requeue implements [deadletter.Store].
func (s *Store) Requeue(ctx context.Context, key, id string, now time.Time) error {
	if err := s.check(key); err != nil {
		return err
	}
	e, err := s.findParked(ctx, key, id)
	if err != nil {
		return err
	}
	return s.requeue(ctx, key, e, now)
}

// requeue moves e, key's parked entry, back to the tail of its waiting
// entries.
func (s *Store) requeue(ctx context.Context, key string, e deadletter.Entry, now time.Time) error {
	parkedAt := e.Pos
	e.Replays, e.Enqueued, e.Pos = 0, now, ""
	blob, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	k := s.keysOf(key)
	n, err := requeueScript.Run(ctx, s.rdb, k[:3], parkedAt, blob).Int()
	if err != nil {
		return fmt.Errorf("redisstore: requeue: %w", err)
	}
	if n == 0 {
		return deadletter.ErrNotFound // purged or requeued meanwhile
	}
	return nil
}

// Purge implements [deadletter.Store].
func (s *Store) Purge(ctx context.Context, key, id string) error {
	if err := s.check(key); err != nil {
		return err
	}
	e, err := s.findParked(ctx, key, id)
	if err != nil {
		return err
	}
	k := s.keysOf(key)
	n, err := purgeScript.Run(ctx, s.rdb, k[:3], e.Pos).Int()
	if err != nil {
		return fmt.Errorf("redisstore: purge: %w", err)
	}
	if n == 0 {
		return deadletter.ErrNotFound
	}
	return nil
}
