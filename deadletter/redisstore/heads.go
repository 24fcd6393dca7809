package redisstore

import (
	"context"
	"fmt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlhead"
)

// headPrefix is how many bytes of an entry's encoding a listing reads
// first: the head of an entry holds its ID, key, method, target and
// metadata, far less in most entries (an entry whose head is longer is
// read whole).
const headPrefix = 1 << 10

// head is one stream entry read without its payload.
type head struct {
	e             deadletter.Entry // no payload; Pos always set
	size, payload int              // encoded and payload bytes
	err           error            // why it does not decode; nil when it does
}

// heads reads up to n entries of stream from from (XRANGE's syntax)
// without their payloads. Failed replays come from field r (parked
// entries) or, when m is not "", from the hash m (waiting ones).
func (s *Store) heads(ctx context.Context, key, stream, from string, n int, m string) ([]head, error) {
	res, err := headsScript.Run(ctx, s.rdb, []string{stream}, from, n, headPrefix).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: read: %w", err)
	}
	var failed []any
	if m != "" && len(res) > 0 {
		fields := make([]string, len(res))
		for i, r := range res {
			if parts, _ := r.([]any); len(parts) == 4 {
				id, _ := parts[0].(string)
				fields[i] = "f:" + id
			}
		}
		failed, _ = s.rdb.HMGet(ctx, m, fields...).Result()
	}
	out := make([]head, 0, len(res))
	for i, r := range res {
		parts, _ := r.([]any)
		if len(parts) != 4 {
			return nil, fmt.Errorf("redisstore: read: unexpected reply %v", r)
		}
		id, _ := parts[0].(string)
		if checkPos(id) != nil {
			return nil, fmt.Errorf("redisstore: read: unexpected reply %v", r)
		}
		h := head{e: deadletter.Entry{Pos: id}}
		h.size = count(parts[2])
		f := parts[3]
		if i < len(failed) {
			f = failed[i]
		}
		prefix, ok := parts[1].(string)
		if !ok {
			_, h.err = decode(key, id, nil, nil) // says it has no entry field
			out = append(out, h)
			continue
		}
		n, short, err := dlhead.Decode([]byte(prefix), h.size, &h.e)
		if short { // a head longer than the prefix: the entry, read whole
			msgs, rerr := s.rdb.XRangeN(ctx, stream, id, id, 1).Result()
			if rerr != nil {
				return nil, fmt.Errorf("redisstore: read: %w", rerr)
			}
			if len(msgs) == 0 { // removed meanwhile: the page would be short
				return nil, fmt.Errorf("redisstore: read: entry %s was removed while it was read; read again", id)
			}
			h.e, err = decode(key, id, msgs[0].Values, nil)
			n, h.e.Payload = len(h.e.Payload), nil
		}
		h.payload, h.err = n, err
		if err == nil && h.e.Key != key {
			h.err = fmt.Errorf("%w: stream entry %s belongs to key %q", deadletter.ErrInvalidEntry, id, h.e.Key)
		}
		h.e.Replays = count(f)
		out = append(out, h)
	}
	return out, nil
}
