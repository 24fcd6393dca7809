package boltstore

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
)

// Lease implements [deadletter.Store]. A bbolt file belongs to one process,
// so the lease is a lock in that process: exclusive among the queues and
// handles that share the file, held until Release or the handle's Close (a
// process that dies holds nothing). ttl is not needed and ignored.
func (s *Store) Lease(_ context.Context, key, owner string, _ time.Duration) (deadletter.Lease, error) {
	if s.closed.Load() {
		return nil, deadletter.ErrClosed
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if l := s.f.leases[key]; l != nil && l.owner != owner {
		return nil, deadletter.ErrLeased
	}
	l := &lease{s: s, key: key, owner: owner}
	s.f.leases[key] = l
	return l, nil
}

// maxReplayCount is the most failed replays an entry's encoding carries
// that its decoder accepts (a hostile file's count may be there already):
// a count written past it would make the entry unreadable.
const maxReplayCount = 1 << 30

type lease struct {
	s          *Store
	key, owner string
}

// held reports whether l is still the key's lease.
func (l *lease) held() error {
	if l.s.closed.Load() {
		return deadletter.ErrClosed
	}
	l.s.f.mu.Lock()
	defer l.s.f.mu.Unlock()
	if l.s.f.leases[l.key] != l {
		return deadletter.ErrLeaseLost
	}
	return nil
}

func (l *lease) Next(context.Context) (deadletter.Entry, bool, error) {
	if err := l.held(); err != nil {
		return deadletter.Entry{}, false, err
	}
	var (
		e     deadletter.Entry
		found bool
		bad   []byte
		err   error
	)
	if verr := l.s.view(func(root *bolt.Bucket) error {
		k, kerr := openKey(root, l.key, false)
		if k == nil || kerr != nil {
			return kerr
		}
		ck, v := k.waiting.Cursor().First()
		if ck == nil {
			return nil
		}
		if e, err = decode(l.key, ck, v); err != nil {
			bad = append([]byte(nil), ck...)
			return nil
		}
		found = true
		return nil
	}); verr != nil {
		return deadletter.Entry{}, false, verr
	}
	if bad != nil {
		if derr := l.remove(bad, true); derr != nil {
			return deadletter.Entry{}, false, derr
		}
		return deadletter.Entry{}, false, &deadletter.CorruptError{Key: l.key, Pos: pos(bad), Err: err}
	}
	return e, found, nil
}

// remove deletes the waiting entry at sequence key sk, if it is there.
func (l *lease) remove(sk []byte, check bool) error {
	if check {
		if err := l.held(); err != nil {
			return err
		}
	}
	return l.s.update(func(root *bolt.Bucket) error {
		k, err := openKey(root, l.key, false)
		if k == nil || err != nil {
			return err
		}
		v := k.waiting.Get(sk)
		if v == nil {
			if k.waiting.Bucket(sk) != nil { // a hostile file's: never counted
				return k.waiting.DeleteBucket(sk)
			}
			return nil
		}
		size := len(v)
		if err := k.waiting.Delete(sk); err != nil {
			return err
		}
		k.nw--
		k.bytes -= int64(size)
		return k.save()
	})
}

func (l *lease) Ack(_ context.Context, e deadletter.Entry) error {
	sk, err := parsePos(e.Pos)
	if err != nil {
		return err
	}
	return l.remove(sk, true)
}

func (l *lease) Expire(ctx context.Context, e deadletter.Entry) error { return l.Ack(ctx, e) }

func (l *lease) Fail(_ context.Context, e deadletter.Entry, maxReplays int) (int, bool, error) {
	if err := l.held(); err != nil {
		return 0, false, err
	}
	sk, err := parsePos(e.Pos)
	if err != nil {
		return 0, false, err
	}
	var (
		n      int
		parked bool
	)
	err = l.s.update(func(root *bolt.Bucket) error {
		k, err := openKey(root, l.key, false)
		if k == nil || err != nil {
			return err
		}
		v := k.waiting.Get(sk)
		if v == nil {
			if k.waiting.Bucket(sk) != nil { // a hostile file's: never counted
				return k.waiting.DeleteBucket(sk)
			}
			return nil
		}
		cur, err := decode(l.key, sk, v)
		if err != nil {
			return err
		}
		old := len(v)
		cur.Replays = min(cur.Replays+1, maxReplayCount)
		n = cur.Replays
		blob, err := cur.MarshalBinary()
		if err != nil {
			return err
		}
		k.bytes += int64(len(blob) - old)
		if n < maxReplays {
			if err := k.waiting.Put(sk, blob); err != nil {
				return err
			}
			return k.save()
		}
		parked = true
		seq, err := k.nextSeq()
		if err != nil {
			return err
		}
		if err := k.waiting.Delete(sk); err != nil {
			return err
		}
		if err := k.parked.Put(seqKey(seq), blob); err != nil {
			return err
		}
		k.nw--
		k.np++
		return k.save()
	})
	return n, parked, err
}

func (l *lease) Release(context.Context) error {
	l.s.f.mu.Lock()
	defer l.s.f.mu.Unlock()
	if l.s.f.leases[l.key] == l {
		delete(l.s.f.leases, l.key)
	}
	return nil
}
