package deadletter

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/meshless/meshless/internal/dlhead"
)

// Limits on an [Entry], checked by [Queue.Defer] and again whenever an entry
// is decoded: whatever a store hands back is bounded before it is used.
const (
	MaxKeyBytes      = 256        // Key
	MaxIDBytes       = 128        // ID
	MaxMethodBytes   = 1 << 10    // Method
	MaxTargetBytes   = 8 << 10    // Target
	MaxMetadataKeys  = 64         // distinct metadata keys
	MaxMetadataVals  = 16         // values of one metadata key
	MaxMetadataBytes = 16 << 10   // all metadata keys and values together
	MaxPayloadBytes  = 16 << 20   // Payload
	maxEncodedBytes  = 17 << 20   // a whole encoded entry, far above the sum of the above
	entryMagic       = byte(0xD1) // first byte of an encoded entry
	entryVersion     = byte(1)    // second byte
)

// Entry is one deferred call, as a [Store] keeps it.
//
// The queue reads Key, ID, Enqueued and Replays; Method, Target, Payload and
// Metadata are opaque to it and handed back unchanged to the key's
// [Handler] when the entry is replayed.
type Entry struct {
	// ID identifies the entry for as long as it lives: it is the replay id
	// that every replay carries ([ReplayID], the meshless-replay-id header),
	// so that a server can deduplicate. [Queue.Defer] sets a random one
	// when it is empty. Printable ASCII without spaces, at most
	// [MaxIDBytes].
	ID string
	// Key is the queue the entry waits in: the key of the circuit breaker it
	// waits on (for example "pkg.Svc"). Replays keep the order of entries
	// of one key. Keys come from configuration, never from the wire.
	Key string
	// Method and Target say what to call: for gRPC the full method
	// ("/pkg.Svc/Method") and, optionally, the connection's target; for
	// HTTP the request method ("POST") and URL.
	Method, Target string
	// Payload is the encoded request.
	Payload []byte
	// Metadata is the request's metadata (gRPC) or headers (HTTP) that the
	// configuration allows to be kept (Config.Metadata); keys are lower
	// case. Defer drops every other key before the entry reaches the store.
	Metadata map[string][]string
	// Enqueued is when the entry was deferred, read from the queue's clock;
	// its age counts from here (Config.MaxAge). A requeued entry starts
	// again from the time it was requeued.
	Enqueued time.Time
	// Replays is the number of replays of the entry that failed. It is
	// parked when it reaches Config.MaxReplays.
	Replays int
	// Pos is where the store keeps the entry (a bbolt sequence number, a
	// Redis stream ID): set by the store when it reads the entry, ignored by
	// Defer, and used as the cursor of [Store.List].
	Pos string
}

// ErrInvalidEntry is matched by every error about an entry that is out of
// bounds or malformed (errors.Is), whether a caller built it or a store
// returned it.
var ErrInvalidEntry = errors.New("deadletter: invalid entry")

func invalid(field string, problem string) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidEntry, field, problem)
}

// NewID returns a random entry ID: 32 hexadecimal digits (128 bits).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b[:])
}

// validate checks e's bounds; every problem names its field.
func (e *Entry) validate() error {
	var errs []error
	if err := checkKey(e.Key); err != nil {
		errs = append(errs, err)
	}
	if e.ID == "" || len(e.ID) > MaxIDBytes || !isToken(e.ID) {
		errs = append(errs, invalid("ID", "must be 1 to "+strconv.Itoa(MaxIDBytes)+" printable ASCII characters without spaces, got "+strconv.Quote(trunc(e.ID))))
	}
	if len(e.Method) > MaxMethodBytes || !utf8.ValidString(e.Method) {
		errs = append(errs, invalid("Method", "must be valid UTF-8 of at most "+strconv.Itoa(MaxMethodBytes)+" bytes"))
	}
	if len(e.Target) > MaxTargetBytes || !utf8.ValidString(e.Target) {
		errs = append(errs, invalid("Target", "must be valid UTF-8 of at most "+strconv.Itoa(MaxTargetBytes)+" bytes"))
	}
	if len(e.Payload) > MaxPayloadBytes {
		errs = append(errs, invalid("Payload", "must be at most "+strconv.Itoa(MaxPayloadBytes)+" bytes, got "+strconv.Itoa(len(e.Payload))))
	}
	if len(e.Metadata) > MaxMetadataKeys {
		errs = append(errs, invalid("Metadata", "must have at most "+strconv.Itoa(MaxMetadataKeys)+" keys"))
	}
	size := 0
	for k, vs := range e.Metadata {
		if k == "" || !isToken(k) {
			errs = append(errs, invalid("Metadata", "key "+strconv.Quote(trunc(k))+" is not printable ASCII without spaces"))
		}
		if len(vs) > MaxMetadataVals {
			errs = append(errs, invalid("Metadata", "key "+strconv.Quote(trunc(k))+" has more than "+strconv.Itoa(MaxMetadataVals)+" values"))
		}
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	if size > MaxMetadataBytes {
		errs = append(errs, invalid("Metadata", "must hold at most "+strconv.Itoa(MaxMetadataBytes)+" bytes of keys and values"))
	}
	if e.Replays < 0 {
		errs = append(errs, invalid("Replays", "must not be negative"))
	}
	return errors.Join(errs...)
}

// checkKey checks a key's bounds.
func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyBytes || !utf8.ValidString(key) {
		return invalid("Key", "must be valid UTF-8 of 1 to "+strconv.Itoa(MaxKeyBytes)+" bytes, got "+strconv.Quote(trunc(key)))
	}
	for _, r := range key {
		if r < ' ' || r == 0x7f {
			return invalid("Key", "must not contain control characters, got "+strconv.Quote(trunc(key)))
		}
	}
	return nil
}

// CheckKey reports whether key is a valid entry key: 1 to [MaxKeyBytes]
// bytes of UTF-8 without control characters. Stores call it on keys they
// read back.
func CheckKey(key string) error { return checkKey(key) }

// isToken reports whether s is printable ASCII without spaces.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// MarshalBinary encodes e (all fields but Pos) in the versioned binary form
// the stores keep. It fails on an entry out of bounds.
func (e Entry) MarshalBinary() ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	return e.appendBinary(nil), nil
}

// appendBinary appends e's encoding to b; e must be valid.
func (e *Entry) appendBinary(b []byte) []byte {
	b = append(b, entryMagic, entryVersion)
	b = appendString(b, e.ID)
	b = appendString(b, e.Key)
	b = appendString(b, e.Method)
	b = appendString(b, e.Target)
	var nanos int64
	if !e.Enqueued.IsZero() {
		nanos = e.Enqueued.UnixNano()
	}
	b = binary.AppendVarint(b, nanos)
	b = binary.AppendUvarint(b, uint64(e.Replays))
	keys := make([]string, 0, len(e.Metadata))
	for k := range e.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same entry always encodes to the same bytes
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, k)
		vs := e.Metadata[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(e.Payload)))
	return append(b, e.Payload...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalBinary decodes what [Entry.MarshalBinary] encoded into e. It
// treats b as hostile: every length is bounded, a malformed or out-of-bounds
// entry is an error matching [ErrInvalidEntry], and nothing of b is retained
// (the payload is copied). Pos is left as it was.
func (e *Entry) UnmarshalBinary(b []byte) error {
	out, d, n := decodeHead(b)
	if p := d.bytes(n); p != nil {
		out.Payload = slices.Clone(p)
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return invalid("encoding", "has "+strconv.Itoa(len(d.b))+" trailing bytes")
	}
	if err := out.validate(); err != nil {
		return err
	}
	out.Pos = e.Pos
	*e = out
	return nil
}

func init() {
	dlhead.Decode = func(b []byte, total int, e any) (int, bool, error) {
		return e.(*Entry).unmarshalHead(b, total)
	}
}

// unmarshalHead decodes into e every field but the payload from b, the
// first bytes of an encoding of total bytes, and returns the payload's
// length; short when b ends before the head does (see internal/dlhead).
// The payload's bytes are never read: only its length is checked against
// total.
func (e *Entry) unmarshalHead(b []byte, total int) (payloadBytes int, short bool, err error) {
	if total > maxEncodedBytes || len(b) > total {
		return 0, false, invalid("encoding", "is "+strconv.Itoa(total)+" bytes, more than any valid entry")
	}
	out, d, n := decodeHead(b)
	if d.err != nil {
		return 0, len(b) < total, d.err
	}
	if head := len(b) - len(d.b); head+n != total {
		return 0, false, invalid("encoding", "is "+strconv.Itoa(total)+" bytes, not the "+strconv.Itoa(head+n)+" its head says")
	}
	if err := out.validate(); err != nil {
		return 0, false, err
	}
	out.Pos = e.Pos
	*e = out
	return n, false, nil
}

// decodeHead decodes b up to the payload, whose length it returns with the
// decoder (at the payload's first byte, or with the first problem in err).
func decodeHead(b []byte) (out Entry, d decoder, payloadBytes int) {
	if len(b) > maxEncodedBytes {
		d.err = invalid("encoding", "is "+strconv.Itoa(len(b))+" bytes, more than any valid entry")
		return out, d, 0
	}
	if len(b) < 2 || b[0] != entryMagic {
		d.err = invalid("encoding", "is not a dead-letter entry")
		return out, d, 0
	}
	if b[1] != entryVersion {
		d.err = invalid("encoding", "has unknown version "+strconv.Itoa(int(b[1])))
		return out, d, 0
	}
	d.b = b[2:]
	out.ID = d.str(MaxIDBytes)
	out.Key = d.str(MaxKeyBytes)
	out.Method = d.str(MaxMethodBytes)
	out.Target = d.str(MaxTargetBytes)
	if nanos := d.varint(); nanos != 0 {
		out.Enqueued = time.Unix(0, nanos)
	}
	out.Replays = int(d.uvarint(1 << 30))
	if n := int(d.uvarint(MaxMetadataKeys)); n > 0 && d.err == nil {
		out.Metadata = make(map[string][]string, n)
		for range n {
			k := d.str(MaxMetadataBytes)
			nv := int(d.uvarint(MaxMetadataVals))
			if d.err != nil {
				break
			}
			vs := make([]string, 0, nv)
			for range nv {
				vs = append(vs, d.str(MaxMetadataBytes))
			}
			out.Metadata[k] = vs
		}
	}
	return out, d, int(d.uvarint(MaxPayloadBytes))
}

// decoder reads a hostile encoding; the first problem sticks in err and
// every later read returns zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = invalid("encoding", "is truncated or out of bounds")
	}
}

func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str(limit int) string {
	return string(d.bytes(int(d.uvarint(uint64(limit)))))
}
