package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	stream, m := k[0], k[2]
	if state == deadletter.Parked {
		stream, m = k[1], ""
	}
	n = min(max(n, 0), deadletter.MaxList)
	if n == 0 {
		return nil, nil
	}
	hs, err := s.heads(ctx, key, stream, from, n, m)
	if err != nil {
		return nil, err
	}
	out := make([]dlraw.Item, 0, len(hs))
	for _, h := range hs {
		if errors.Is(h.err, errGone) {
			return nil, fmt.Errorf("redisstore: read: entry %s was removed while it was read; read again", h.e.Pos)
		}
		out = append(out, dlraw.Item{Entry: h.e, Size: h.size, PayloadBytes: h.payload, Err: h.err})
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

// RequeueAt implements [dlraw.Store].
func (r raw) RequeueAt(ctx context.Context, key, pos string, now time.Time) error {
	s := r.s
	if err := s.check(key); err != nil {
		return err
	}
	if err := checkPos(pos); err != nil {
		return err
	}
	ws, err := s.whole(ctx, s.keysOf(key)[1], "", []string{pos})
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if len(ws) != 1 {
		return deadletter.ErrNotFound
	}
	e, err := ws[0].decode(key)
	if err != nil {
		return err
	}
	return s.requeue(ctx, key, e, now)
}
