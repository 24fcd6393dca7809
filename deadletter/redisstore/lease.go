package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/deadletter"
)

// Lease implements [deadletter.Store]: a key in Redis holding owner's name,
// with a TTL renewed by each Next, so that one instance at a time replays a
// key (two would break its order). An instance that dies holds the lease
// until its TTL ends; the next holder then takes over the entry it was
// replaying.
func (s *Store) Lease(ctx context.Context, key, owner string, ttl time.Duration) (deadletter.Lease, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	if owner == "" || strings.ContainsAny(owner, " \t\r\n") {
		return nil, fmt.Errorf("redisstore: lease owner %q: must be a word", owner)
	}
	ttl = min(max(ttl, time.Second), maxLeaseTTL)
	k := s.keysOf(key)
	n, err := leaseScript.Run(ctx, s.rdb, k[3:], owner, ttl.Milliseconds(), maxLeaseTTL.Milliseconds()).Int()
	if err != nil {
		return nil, fmt.Errorf("redisstore: lease: %w", err)
	}
	if n == 0 {
		return nil, deadletter.ErrLeased
	}
	return &lease{s: s, key: key, k: k, owner: owner, ttl: ttl}, nil
}

// maxClearCalls bounds the calls of one Next that clear pending IDs
// whose entries are gone: each clears at least 100 of them (up to 1000 on
// Redis 7), so at least a million between two entries.
const maxClearCalls = 10_000

type lease struct {
	s          *Store
	key, owner string
	k          keys
	ttl        time.Duration
}

// scriptErr maps a script's LEASELOST error to deadletter.ErrLeaseLost.
func scriptErr(op string, err error) error {
	if err != nil && strings.HasPrefix(err.Error(), "LEASELOST") {
		return fmt.Errorf("redisstore: %s: %w", op, deadletter.ErrLeaseLost)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

func (l *lease) Next(ctx context.Context) (deadletter.Entry, bool, error) {
	if l.s.closed.Load() {
		return deadletter.Entry{}, false, deadletter.ErrClosed
	}
	var res any
	var err error
	// Each call clears up to its share of pending IDs whose entries are
	// gone (hostile or trimmed): as many calls as they take, bounded.
	for range maxClearCalls {
		res, err = nextScript.Run(ctx, l.s.rdb, []string{l.k[0], l.k[2], l.k[3]}, l.owner, l.ttl.Milliseconds()).Result()
		if more, _ := res.(string); err != nil || more != "more" {
			break
		}
	}
	if more, _ := res.(string); more == "more" {
		return deadletter.Entry{}, false, nil // the next round goes on
	}
	if errors.Is(err, redis.Nil) {
		return deadletter.Entry{}, false, nil
	}
	if err != nil {
		return deadletter.Entry{}, false, scriptErr("next", err)
	}
	parts, _ := res.([]any)
	var id string
	if len(parts) == 4 {
		id, _ = parts[0].(string)
	}
	if checkPos(id) != nil {
		return deadletter.Entry{}, false, fmt.Errorf("redisstore: next: unexpected reply %v", res)
	}
	var derr error
	e := deadletter.Entry{Pos: id}
	if size, _ := parts[3].(int64); size > 0 { // the script left it in Redis
		derr = fmt.Errorf("%w: stream entry %s is %d bytes, more than any entry", deadletter.ErrInvalidEntry, id, size)
	} else {
		e, derr = decode(l.key, id, fieldMap(parts[1]), parts[2])
	}
	if derr != nil {
		// Hostile or damaged: drop it (counted by the queue) and go on.
		if err := l.remove(ctx, id); err != nil {
			return deadletter.Entry{}, false, err
		}
		return deadletter.Entry{}, false, &deadletter.CorruptError{Key: l.key, Pos: id, Err: derr}
	}
	return e, true, nil
}

func (l *lease) remove(ctx context.Context, pos string) error {
	if l.s.closed.Load() {
		return deadletter.ErrClosed
	}
	if err := checkPos(pos); err != nil {
		return err
	}
	if err := removeScript.Run(ctx, l.s.rdb, l.k[:], l.owner, pos).Err(); err != nil {
		return scriptErr("remove", err)
	}
	return nil
}

func (l *lease) Ack(ctx context.Context, e deadletter.Entry) error    { return l.remove(ctx, e.Pos) }
func (l *lease) Expire(ctx context.Context, e deadletter.Entry) error { return l.remove(ctx, e.Pos) }

func (l *lease) Fail(ctx context.Context, e deadletter.Entry, maxReplays int) (int, bool, error) {
	if l.s.closed.Load() {
		return 0, false, deadletter.ErrClosed
	}
	if err := checkPos(e.Pos); err != nil {
		return 0, false, err
	}
	res, err := failScript.Run(ctx, l.s.rdb, l.k[:], l.owner, e.Pos, maxReplays).Slice()
	if err != nil {
		return 0, false, scriptErr("fail", err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("redisstore: fail: unexpected reply %v", res)
	}
	return count(res[0]), count(res[1]) == 1, nil
}

func (l *lease) Release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.s.rdb, []string{l.k[0], l.k[3]}, l.owner).Err(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	return nil
}
