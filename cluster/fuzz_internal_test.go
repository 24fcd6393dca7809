package cluster

import (
	"strings"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
)

// FuzzDecodeOpening: whatever the open key or a message holds, decoding
// never panics, what decodes is within the record's bounds and re-encodes to
// a record that decodes to itself; and what an instance of a valid ID
// encodes decodes to what it wrote.
func FuzzDecodeOpening(f *testing.F) {
	f.Add("1764590400000 3 slow_call_rate 9f86d081884c7d65", int64(1764590400000), 3, "9f86d081884c7d65")
	f.Add("1 0 failure_rate a", int64(1), 0, "a")
	f.Add("1 64 half_open_timeout x", int64(1), 65, "x")
	f.Add("1 65 failure_rate x", int64(9223372036854775807), -1, "pod-1")
	f.Add("0 0 failure_rate x", int64(0), 0, "")
	f.Add("-5 0 failure_rate x", int64(-5), 0, "a b")
	f.Add("+5 +0 x y", int64(5), 0, "pod-2")
	f.Add(" 5\t0 x\ny ", int64(5), 0, "a\tb")
	f.Add("9223372036854775808 0 x y", int64(5), 0, "é")
	f.Add(strings.Repeat("9", 300), int64(5), 1<<40, strings.Repeat("i", 65))
	f.Fuzz(func(t *testing.T, s string, until int64, reopens int, instance string) {
		if o, ok := decodeOpening(s); ok {
			if len(s) > maxRecord || o.until <= 0 || o.reopens < 0 || o.reopens > maxReopens || o.instance == "" {
				t.Fatalf("decodeOpening(%q) = %+v, out of bounds", s, o)
			}
			if again, ok := decodeOpening(o.encode()); !ok || again != o {
				t.Fatalf("decodeOpening(%q) = %+v; its encoding %q decodes to %+v, %v", s, o, o.encode(), again, ok)
			}
		}
		opts := defaultOptions()
		opts.instance = instance
		if until <= 0 || opts.validate() != nil {
			return
		}
		in := opening{until: until, reopens: max(reopens, 0), reason: circuitbreaker.ReasonSlowCallRate, instance: instance}
		want := in
		want.reopens = min(in.reopens, maxReopens)
		if got, ok := decodeOpening(in.encode()); !ok || got != want {
			t.Fatalf("an open of instance %q, encoded %q, decodes to %+v, %v; want %+v", instance, in.encode(), got, ok, want)
		}
		m := message{open: true, opening: in, instance: instance, name: "svc"}
		if got, ok := decodeMessage(m.encode()); !ok || got.opening != want || got.instance != instance || got.name != "svc" {
			t.Fatalf("the message %q decodes to %+v, %v", m.encode(), got, ok)
		}
	})
}

// FuzzDecodeMessage: whatever comes on the channel, decoding never panics,
// and a message that decodes re-encodes to one that decodes to itself.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		"o 1764590400000 3 slow_call_rate 9f86d081884c7d65 svc",
		"o 1764590400000 3 failure_rate pod name with spaces",
		"c 1764590400000 1764590401000 pod svc",
		"c 1 2  svc", "c -1 +2 a b", "o 1 65 x y z", "o 1 0 x y ", "o ", "c ", "x 1 2 3 4",
		"o 5\t0 x y name rest", "c 9223372036854775808 1 a b", "c 1 2 a ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := decodeMessage(s)
		if !ok {
			return
		}
		if m.open && (m.opening.until <= 0 || m.opening.reopens < 0 || m.opening.reopens > maxReopens || m.instance != m.opening.instance) {
			t.Fatalf("decodeMessage(%q) = %+v, out of bounds", s, m)
		}
		if again, ok := decodeMessage(m.encode()); !ok || again != m {
			t.Fatalf("decodeMessage(%q) = %+v; its encoding %q decodes to %+v, %v", s, m, m.encode(), again, ok)
		}
	})
}

// FuzzDecodeAggregate: whatever a window hash's field holds, decoding never
// panics, what decodes is a window (no negative count, no more failures or
// slow calls than calls) that re-encodes to itself, and capping it keeps it
// one within the cap.
func FuzzDecodeAggregate(f *testing.F) {
	for _, s := range []string{
		"100 20 5 1764590400000 1764590401000", "0 0 0 0 0", "1 2 0 0 0", "1 0 2 0 0", "-1 0 0 0 0",
		"+1 +0 +0 +0 +0", " 1\t1\n1 1 1 ", "1 1 1 1", "1 1 1 1 1 1",
		"9223372036854775807 9223372036854775807 9223372036854775807 0 0", "9223372036854775808 0 0 0 0",
	} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, s string, limit int64) {
		a, ok := decodeAggregate(s)
		if !ok {
			return
		}
		if a.calls < 0 || a.failures < 0 || a.slow < 0 || a.since < 0 || a.at < 0 || a.failures > a.calls || a.slow > a.calls {
			t.Fatalf("decodeAggregate(%q) = %+v, not a window", s, a)
		}
		if again, ok := decodeAggregate(a.encode()); !ok || again != a {
			t.Fatalf("decodeAggregate(%q) = %+v; its encoding %q decodes to %+v, %v", s, a, a.encode(), again, ok)
		}
		if limit < 0 {
			return
		}
		c := capped(a, limit)
		if c.calls > limit || c.calls > a.calls || c.failures < 0 || c.slow < 0 || c.failures > c.calls || c.slow > c.calls {
			t.Fatalf("capped(%+v, %d) = %+v", a, limit, c)
		}
	})
}
