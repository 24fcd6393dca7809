package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlraw"
)

// Entries that do not decode (a damaged file, one a newer version wrote, a
// hand-edited stream): Store.List skips them and Store.Purge finds entries
// by an ID they have lost, so the command reads the stores' raw entries
// (internal/dlraw) to show them, with their position and why they do not
// decode, and to purge them by position.

// maxUnreadableShown bounds the rows of entries that do not decode one
// list prints; the others are counted, with where they lie.
const maxUnreadableShown = 20

// listRaw prints up to n of key's entries in state that decode, however
// many that do not stand before them, and those, up to maxUnreadableShown
// rows.
func listRaw(ctx context.Context, raw dlraw.Store, key string, state deadletter.State, after string, n int, w io.Writer) error {
	var rows []dlraw.Item
	readable, bad := 0, 0
	// The unreadable entries not shown: from hiddenFrom to hiddenTo, the
	// first of them after the position before.
	var hiddenFrom, hiddenTo, before string
	prev := after
scan:
	for range deadletter.MaxMaxEntries/deadletter.MaxList + 1 {
		if err := ctx.Err(); err != nil { // the bbolt store does not watch ctx
			return err
		}
		items, err := raw.Scan(ctx, key, state, after, deadletter.MaxList)
		if err != nil {
			return err
		}
		for _, it := range items {
			at := prev
			prev = it.Entry.Pos
			if it.Err != nil {
				if bad++; bad > maxUnreadableShown {
					if hiddenFrom == "" {
						hiddenFrom, before = it.Entry.Pos, at
					}
					hiddenTo = it.Entry.Pos
					continue
				}
			} else {
				readable++
			}
			rows = append(rows, it)
			if readable == n {
				break scan
			}
		}
		if len(items) < deadletter.MaxList {
			break
		}
		after = items[len(items)-1].Entry.Pos
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tID\tENQUEUED\tFAILED REPLAYS\tMETHOD\tPAYLOAD BYTES")
	for _, it := range rows {
		e := it.Entry
		if it.Err != nil {
			fmt.Fprintf(tw, "%s\t(unreadable)\t-\t-\t%s\t-\n", printable(e.Pos), printable(fmt.Sprintf("%d bytes that do not decode: %v", it.Size, it.Err)))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", printable(e.Pos), e.ID, e.Enqueued.UTC().Format(time.RFC3339), e.Replays, printable(e.Method), it.PayloadBytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		drop := "purge " + key + " -at POS drops one"
		if state == deadletter.Waiting {
			drop = "the next replay round drops them, counted as dropped"
		}
		fmt.Fprintf(w, "%s not decode (%s)\n", entries(bad, "does"), drop)
	}
	if bad > maxUnreadableShown {
		fmt.Fprintf(w, "the first %d shown; the other %d, from %s to %s, are listed by list %s %s -after %s\n",
			maxUnreadableShown, bad-maxUnreadableShown, printable(hiddenFrom), printable(hiddenTo), printable(key), state, printable(before))
	}
	return nil
}

// entries returns "1 entry does", "2 entries do" and the like.
func entries(n int, verb string) string {
	if n == 1 {
		return "1 entry " + verb
	}
	return strconv.Itoa(n) + " entries " + strings.TrimSuffix(verb, "es")
}

// findRaw is find reading the entries' heads, then the one entry it looks
// for whole: never the other payloads.
func findRaw(ctx context.Context, s deadletter.Store, raw dlraw.Store, key, id string) (deadletter.Entry, deadletter.State, error) {
	for _, state := range []deadletter.State{deadletter.Parked, deadletter.Waiting} {
		after := ""
		for range deadletter.MaxMaxEntries/deadletter.MaxList + 1 {
			if err := ctx.Err(); err != nil { // the bbolt store does not watch ctx
				return deadletter.Entry{}, 0, err
			}
			items, err := raw.Scan(ctx, key, state, after, deadletter.MaxList)
			if err != nil {
				return deadletter.Entry{}, 0, err
			}
			prev := after
			for _, it := range items {
				if it.Err == nil && it.Entry.ID == id {
					es, err := s.List(ctx, key, state, prev, 1)
					if err != nil {
						return deadletter.Entry{}, 0, err
					}
					if len(es) == 1 && es[0].ID == id && es[0].Pos == it.Entry.Pos {
						return es[0], state, nil
					}
				}
				prev = it.Entry.Pos
			}
			if len(items) < deadletter.MaxList {
				break
			}
			after = prev
		}
	}
	return deadletter.Entry{}, 0, fmt.Errorf("key %q: %w: %s", key, deadletter.ErrNotFound, id)
}

// parked is one parked entry: its ID ("" when it does not decode) and its
// position.
type parked struct{ id, pos string }

// allParked returns key's parked entries, those that do not decode too
// when the store can read them raw, reading at most MaxMaxEntries.
func allParked(ctx context.Context, s deadletter.Store, key string) ([]parked, error) {
	raw := dlraw.Of(s)
	var out []parked
	after := ""
	for range deadletter.MaxMaxEntries/deadletter.MaxList + 1 {
		if err := ctx.Err(); err != nil { // the bbolt store does not watch ctx
			return nil, err
		}
		var page []parked
		if raw != nil {
			items, err := raw.Scan(ctx, key, deadletter.Parked, after, deadletter.MaxList)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				p := parked{pos: it.Entry.Pos}
				if it.Err == nil {
					p.id = it.Entry.ID
				}
				page = append(page, p)
			}
		} else {
			es, err := s.List(ctx, key, deadletter.Parked, after, deadletter.MaxList)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				page = append(page, parked{id: e.ID, pos: e.Pos})
			}
		}
		out = append(out, page...)
		if len(page) < deadletter.MaxList {
			break
		}
		after = page[len(page)-1].pos
	}
	return out, nil
}

// unreadableLeft is the error of a requeue -all that left parked entries
// that do not decode at the positions bad.
func unreadableLeft(key string, bad []string) error {
	shown := bad[:min(len(bad), 10)]
	more := ""
	if len(bad) > len(shown) {
		more = ", …"
	}
	n := strconv.Itoa(len(bad)) + " parked entries do"
	if len(bad) == 1 {
		n = "1 parked entry does"
	}
	return fmt.Errorf("key %q: %s not decode and cannot be requeued (at %s%s): list %s parked shows why; purge %s -at POS drops one",
		key, n, strings.Join(shown, ", "), more, key, key)
}
