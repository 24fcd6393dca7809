package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlhead"
)

// headPrefix is how many bytes of an entry's encoding a listing reads
// first: the head of an entry holds its ID, key, method, target and
// metadata, far less in most entries (an entry whose head is longer is
// read whole).
const headPrefix = 1 << 10

// errGone is the error of a head whose entry was removed between the two
// reads of one that is longer than headPrefix: List and the others skip
// it, as an entry removed before; a raw listing, which shows every entry,
// fails (its page would be short).
var errGone = errors.New("redisstore: the entry was removed while it was read")

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
	res, err := headsScript.Run(ctx, s.rdb, streamKeys(stream, m), from, n, headPrefix).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: read: %w", err)
	}
	out := make([]head, 0, len(res))
	for _, r := range res {
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
		prefix, ok := parts[1].(string)
		if !ok {
			_, h.err = decode(key, id, nil, nil) // says it has no entry field
			out = append(out, h)
			continue
		}
		n, short, err := dlhead.Decode([]byte(prefix), h.size, &h.e)
		if short { // a head longer than the prefix: the entry, read whole
			ws, rerr := s.whole(ctx, stream, m, []string{id})
			if rerr != nil {
				return nil, fmt.Errorf("redisstore: read: %w", rerr)
			}
			if len(ws) == 0 { // removed meanwhile
				h.err = errGone
				out = append(out, h)
				continue
			}
			h.e, err = ws[0].decode(key)
			n, h.e.Payload = len(h.e.Payload), nil
		}
		h.payload, h.err = n, err
		if err == nil && h.e.Key != key {
			h.err = fmt.Errorf("%w: stream entry %s belongs to key %q", deadletter.ErrInvalidEntry, id, h.e.Key)
		}
		h.e.Replays = count(parts[3])
		out = append(out, h)
	}
	return out, nil
}

// streamKeys returns the KEYS of the reading scripts: stream, and m when
// it is not "".
func streamKeys(stream, m string) []string {
	if m == "" {
		return []string{stream}
	}
	return []string{stream, m}
}

// stored is one stream entry as the entries script sends it back.
type stored struct {
	id     string
	e      any // field e, a string; nil when none or over an entry's bound
	size   int // e's length
	failed any // failed replays, a short string; nil when none
}

// whole reads the entries ids of stream whole (their field e, never their
// other fields), those that are still there, in order; failed replays as
// heads reads them.
func (s *Store) whole(ctx context.Context, stream, m string, ids []string) ([]stored, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	res, err := entriesScript.Run(ctx, s.rdb, streamKeys(stream, m), args...).Slice()
	if err != nil {
		return nil, err
	}
	out := make([]stored, 0, len(res))
	for _, r := range res {
		parts, _ := r.([]any)
		if len(parts) != 4 {
			return nil, fmt.Errorf("unexpected reply %v", r)
		}
		w := stored{e: parts[1], size: count(parts[2]), failed: parts[3]}
		w.id, _ = parts[0].(string)
		if checkPos(w.id) != nil {
			return nil, fmt.Errorf("unexpected reply %v", r)
		}
		out = append(out, w)
	}
	return out, nil
}

// decode decodes w, an entry of key.
func (w stored) decode(key string) (deadletter.Entry, error) {
	if _, ok := w.e.(string); !ok && w.size > 0 {
		return deadletter.Entry{Pos: w.id}, fmt.Errorf("%w: stream entry %s is %d bytes, more than any entry", deadletter.ErrInvalidEntry, w.id, w.size)
	}
	return decode(key, w.id, map[string]any{"e": w.e}, w.failed)
}
