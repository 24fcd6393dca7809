package deadletter_test

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
)

func TestEntryRoundTrip(t *testing.T) {
	in := deadletter.Entry{
		ID: "0123abcd", Key: "pkg.Svc", Method: "/pkg.Svc/Charge", Target: "dns:///pay:443",
		Payload:  []byte{0, 1, 2, 3},
		Metadata: map[string][]string{"x-request-id": {"r"}, "traceparent": {"00-ab-cd-01"}},
		Enqueued: time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC), Replays: 2, Pos: "ignored",
	}
	b, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := in.MarshalBinary()
	if !bytes.Equal(b, b2) {
		t.Fatal("the same entry encodes to different bytes")
	}
	out := deadletter.Entry{Pos: "kept"}
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if out.ID != in.ID || out.Key != in.Key || out.Method != in.Method || out.Target != in.Target ||
		!bytes.Equal(out.Payload, in.Payload) || !out.Enqueued.Equal(in.Enqueued) || out.Replays != 2 ||
		!maps.EqualFunc(out.Metadata, in.Metadata, slices.Equal) || out.Pos != "kept" {
		t.Fatalf("decoded %+v", out)
	}
	b[len(b)-1] = 9 // the payload is copied, not aliased
	if out.Payload[3] != 3 {
		t.Fatal("the decoded payload aliases the input")
	}
}

func TestEntryBounds(t *testing.T) {
	ok := deadletter.Entry{ID: "a", Key: "k"}
	for _, tc := range []struct {
		name string
		edit func(e *deadletter.Entry)
		want string
	}{
		{name: "empty key", edit: func(e *deadletter.Entry) { e.Key = "" }, want: "Key must be valid UTF-8"},
		{name: "long key", edit: func(e *deadletter.Entry) { e.Key = strings.Repeat("k", 257) }, want: "Key must be"},
		{name: "id with a space", edit: func(e *deadletter.Entry) { e.ID = "a b" }, want: "ID must be"},
		{name: "huge payload", edit: func(e *deadletter.Entry) { e.Payload = make([]byte, deadletter.MaxPayloadBytes+1) }, want: "Payload must be at most"},
		{name: "metadata key", edit: func(e *deadletter.Entry) { e.Metadata = map[string][]string{"a b": nil} }, want: "Metadata key"},
		{name: "negative replays", edit: func(e *deadletter.Entry) { e.Replays = -1 }, want: "Replays must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ok
			tc.edit(&e)
			_, err := e.MarshalBinary()
			if err == nil || !errors.Is(err, deadletter.ErrInvalidEntry) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("MarshalBinary: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestHostileEncodings(t *testing.T) {
	good, _ := deadletter.Entry{ID: "a", Key: "k", Payload: []byte("p")}.MarshalBinary()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{name: "empty", b: nil},
		{name: "not ours", b: []byte("hello")},
		{name: "unknown version", b: append([]byte{good[0], 9}, good[2:]...)},
		{name: "truncated", b: good[:len(good)-1]},
		{name: "trailing bytes", b: append(slices.Clone(good), 0)},
		{name: "huge length", b: []byte{good[0], good[1], 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{name: "invalid key", b: func() []byte {
			b := slices.Clone(good)
			b[5] = '\n' // the key "k" → a control character
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e deadletter.Entry
			if err := e.UnmarshalBinary(tc.b); !errors.Is(err, deadletter.ErrInvalidEntry) {
				t.Fatalf("UnmarshalBinary: %v, want ErrInvalidEntry", err)
			}
		})
	}
}

// FuzzUnmarshalBinary: whatever a store hands back, decoding never panics,
// and what decodes re-encodes to the same bytes.
func FuzzUnmarshalBinary(f *testing.F) {
	good, _ := deadletter.Entry{ID: "a", Key: "k", Payload: []byte("p"),
		Metadata: map[string][]string{"m": {"v"}}, Enqueued: time.Unix(5, 0)}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{0xD1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e deadletter.Entry
		if err := e.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := e.MarshalBinary()
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v", err)
		}
		var e2 deadletter.Entry
		if err := e2.UnmarshalBinary(again); err != nil || e2.ID != e.ID || !bytes.Equal(e2.Payload, e.Payload) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestNewIDIsRandomAndWellFormed(t *testing.T) {
	a, b := deadletter.NewID(), deadletter.NewID()
	if a == b || len(a) != 32 {
		t.Fatalf("NewID: %q %q", a, b)
	}
}
