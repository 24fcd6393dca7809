package deadletter_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/dlhead"
)

// FuzzDecodeHead: the head decoder the stores' listings use
// (internal/dlhead) agrees with UnmarshalBinary on every input: it fails
// when UnmarshalBinary fails, else returns the same entry without its
// payload and the payload's length; given a prefix of the encoding, it
// asks for more (short) or agrees.
func FuzzDecodeHead(f *testing.F) {
	good, _ := deadletter.Entry{ID: "a", Key: "k", Method: "/p.S/M", Target: "t", Payload: []byte("payload"),
		Metadata: map[string][]string{"m": {"v", "w"}}, Enqueued: time.Unix(5, 0), Replays: 3}.MarshalBinary()
	f.Add(good, 0)
	f.Add(good, 9)
	f.Add([]byte{0xD1, 1}, 1)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		var full deadletter.Entry
		ferr := full.UnmarshalBinary(b)
		var head deadletter.Entry
		n, short, herr := dlhead.Decode(b, len(b), &head)
		if short || (ferr == nil) != (herr == nil) {
			t.Fatalf("all of it: short %v, head error %v; UnmarshalBinary's %v", short, herr, ferr)
		}
		if ferr != nil {
			return
		}
		if n != len(full.Payload) {
			t.Fatalf("payload length %d, want %d", n, len(full.Payload))
		}
		full.Payload = nil
		if !reflect.DeepEqual(head, full) {
			t.Fatalf("head %+v, want %+v", head, full)
		}
		if cut < 0 || cut > len(b) {
			return
		}
		var pre deadletter.Entry
		pn, short, err := dlhead.Decode(b[:cut], len(b), &pre)
		if short {
			return
		}
		if err != nil || pn != n || !reflect.DeepEqual(pre, head) {
			t.Fatalf("prefix of %d bytes: %+v, %d, %v; want the head and %d", cut, pre, pn, err, n)
		}
	})
}
