package redisstore

import (
	"context"
	"fmt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlraw"
)

// The command's raw operations (internal/dlraw): entries as they are
// stored, readable or not, and the removal of a parked one by position.

func init() {
	dlraw.Register(func(s deadletter.Store) dlraw.Store {
		if rs, ok := s.(*Store); ok {
			return raw{rs}
		}
		return nil
	})
}

type raw struct{ s *Store }

// Scan implements [dlraw.Store].
func (r raw) Scan(ctx context.Context, key string, state deadletter.State, after string, n int) ([]dlraw.Item, error) {
	s := r.s
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
	stream := k[0]
	if state == deadletter.Parked {
		stream = k[1]
	}
	n = min(max(n, 0), deadletter.MaxList)
	if n == 0 {
		return nil, nil
	}
	msgs, err := s.rdb.XRangeN(ctx, stream, from, "+", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: scan: %w", err)
	}
	var failed []any
	if state == deadletter.Waiting && len(msgs) > 0 {
		fields := make([]string, len(msgs))
		for i, m := range msgs {
			fields[i] = "f:" + m.ID
		}
		failed, _ = s.rdb.HMGet(ctx, k[2], fields...).Result()
	}
	out := make([]dlraw.Item, 0, len(msgs))
	for i, m := range msgs {
		var f any = m.Values["r"]
		if i < len(failed) {
			f = failed[i]
		}
		e, err := decode(key, m.ID, m.Values, f)
		b, _ := m.Values["e"].(string)
		out = append(out, dlraw.Item{Entry: e, Size: len(b), Err: err})
	}
	return out, nil
}

// PurgeAt implements [dlraw.Store].
func (r raw) PurgeAt(ctx context.Context, key, pos string) error {
	s := r.s
	if err := s.check(key); err != nil {
		return err
	}
	if err := checkPos(pos); err != nil {
		return err
	}
	k := s.keysOf(key)
	n, err := purgeScript.Run(ctx, s.rdb, k[:3], pos).Int()
	if err != nil {
		return fmt.Errorf("redisstore: purge: %w", err)
	}
	if n == 0 {
		return deadletter.ErrNotFound
	}
	return nil
}
