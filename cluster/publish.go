package cluster

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// What one sync writes of this instance's own windows. A field of the
// window hash counts, for the other instances, while its at is less than
// three sync intervals old (the freshness horizon), and the hash lives
// three sync intervals after its last PEXPIRE: a field of a dead instance
// stops counting, and a hash no instance writes expires. A window that did
// not move since this instance last wrote it is not rewritten at every
// sync, only often enough that it never reaches either limit.

// restampSyncs is k: an unchanged window is rewritten (its at re-stamped,
// the hash's TTL renewed) at the k-th sync after its last write. With a
// sync every interval, a peer reads it at most k intervals old, and the
// hash's TTL is renewed k intervals after it was set: one interval short
// of the three of the horizon and of the TTL, the margin for a late sync
// and for a peer whose clock runs ahead.
const restampSyncs = 2

// horizon is the freshness horizon and the window hash's TTL, in sync
// intervals.
const horizon = 3

// The states of ownField.
const (
	fieldUnknown = iota // never written, or a write failed: write at the next sync
	fieldWritten        // holds agg
	fieldDeleted        // deleted (the breaker is not CLOSED)
)

// ownField is what this instance's field of one window hash holds, as far
// as the exchanges that wrote it know. Under Cluster.syncMu.
type ownField struct {
	state   uint8
	agg     aggregate // fieldWritten: the window written, and at, when
	skipped int       // fieldWritten: the syncs since that did not rewrite it
}

// sameWindow reports whether a and b hold the same window, whenever
// each was stamped.
func (a aggregate) sameWindow(b aggregate) bool {
	return a.calls == b.calls && a.failures == b.failures && a.slow == b.slow && a.since == b.since
}

// mustWrite reports whether the window a of a CLOSED breaker, stamped with
// this sync's time, is written at this sync, given what its field holds
// and gap, the time since the last sync began (at least one interval), in
// ms. It is written when it moved, when the field's content is not known,
// at the restampSyncs-th sync after its last write, and before that when
// one more gap would leave the field older than horizon - 1/2 intervals (a
// clock gone backwards rewrites it too).
func (c *Cluster) mustWrite(f ownField, a aggregate, gap int64) bool {
	if f.state != fieldWritten || !a.sameWindow(f.agg) || f.skipped+1 >= restampSyncs {
		return true
	}
	age := a.at - f.agg.at
	limit := horizon*c.o.SyncInterval.Milliseconds() - c.o.SyncInterval.Milliseconds()/2
	return age < 0 || age+gap > limit
}

// gap returns the time since the last exchange began, at least one sync
// interval, in ms, and records now as the last exchange's start. Called
// with syncMu held.
func (c *Cluster) gap(now int64) int64 {
	i := c.o.SyncInterval.Milliseconds()
	g := now - c.lastNow
	c.lastNow = now
	return max(g, i)
}

// syncArgs are the arguments of the commands each sync sends for one
// breaker, built once when it joins (go-redis reads them, never changes
// them): a sync allocates none.
type syncArgs struct {
	scan, getRange, expire []any
	hset                   []any // all but the value; cap = len
}

func (c *Cluster) syncArgs(e *entry) syncArgs {
	return syncArgs{
		// One bounded reply: a hash of more than MaxInstances fields leaves
		// a cursor to follow, and is garbage.
		scan: []any{"hscan", e.wkey, uint64(0), "count", int64(MaxInstances)},
		// At most one byte more than a record: "" when absent.
		getRange: []any{"getrange", e.okey, int64(0), int64(maxRecord)},
		expire:   []any{"pexpire", e.wkey, (horizon * c.o.SyncInterval).Milliseconds()},
		hset:     []any{"hset", e.wkey, c.o.instance},
	}
}

// The commands of syncArgs, queued on p.
func (a syncArgs) hscan(ctx context.Context, p redis.Pipeliner) *redis.ScanCmd {
	cmd := redis.NewScanCmd(ctx, nil, a.scan...)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (a syncArgs) getrange(ctx context.Context, p redis.Pipeliner) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, a.getRange...)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (a syncArgs) pexpire(ctx context.Context, p redis.Pipeliner) *redis.BoolCmd {
	cmd := redis.NewBoolCmd(ctx, a.expire...)
	_ = p.Process(ctx, cmd)
	return cmd
}

func (a syncArgs) hsetOwn(ctx context.Context, p redis.Pipeliner, value string) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, append(a.hset[:len(a.hset):len(a.hset)], value)...)
	_ = p.Process(ctx, cmd)
	return cmd
}
