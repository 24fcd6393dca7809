package boltstore

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlraw"
)

// The command's raw operations (internal/dlraw): entries as they are
// stored, readable or not, and the removal of a parked one by position.

func init() {
	dlraw.Register(func(s deadletter.Store) dlraw.Store {
		if bs, ok := s.(*Store); ok {
			return raw{bs}
		}
		return nil
	})
}

type raw struct{ s *Store }

// Scan implements [dlraw.Store].
func (r raw) Scan(_ context.Context, key string, state deadletter.State, after string, n int) ([]dlraw.Item, error) {
	var from []byte
	if after != "" {
		var err error
		if from, err = parsePos(after); err != nil {
			return nil, err
		}
	}
	n = min(n, deadletter.MaxList)
	var out []dlraw.Item
	err := r.s.view(func(root *bolt.Bucket) error {
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
			e, n, err := decodeHead(key, ck, v)
			out = append(out, dlraw.Item{Entry: e, Size: len(v), PayloadBytes: n, Err: err})
		}
		return nil
	})
	return out, err
}

// PurgeAt implements [dlraw.Store].
func (r raw) PurgeAt(_ context.Context, key, at string) error {
	sk, err := parsePos(at)
	if err != nil {
		return err
	}
	return r.s.updateKey(key, func(k *keyBucket) error {
		v := k.parked.Get(sk)
		if v == nil {
			if k.parked.Bucket(sk) != nil { // a hostile file's
				if err := k.parked.DeleteBucket(sk); err != nil {
					return err
				}
				k.recount() // whether the counters held it or not
				return k.save()
			}
			return deadletter.ErrNotFound
		}
		size := len(v)
		if err := k.parked.Delete(sk); err != nil {
			return err
		}
		if len(sk) != 8 { // a hostile file's, which its counters may not hold
			k.recount()
			return k.save()
		}
		k.np--
		k.bytes -= int64(size)
		return k.save()
	})
}

// RequeueAt implements [dlraw.Store].
func (r raw) RequeueAt(_ context.Context, key, at string, now time.Time) error {
	sk, err := parsePos(at)
	if err != nil {
		return err
	}
	return r.s.updateKey(key, func(k *keyBucket) error {
		v := k.parked.Get(sk)
		if v == nil || len(sk) != 8 {
			return deadletter.ErrNotFound
		}
		e, err := decode(key, sk, v)
		if err != nil {
			return err
		}
		return requeue(k, sk, e, now)
	})
}
