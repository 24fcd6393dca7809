package picknote

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/meshless/meshless/internal/procpin"
)

// Endpoint is what a picker notes: the endpoint an attempt was picked to.
type Endpoint interface {
	// Took counts one call to the endpoint, which ended with err after
	// took, as slow or not.
	Took(err error, took time.Duration)
}

// Note is an attempt's context, with the endpoint its last pick chose. It
// is made once per attempt and never reused: gRPC, or an interceptor, may
// keep an attempt's context after the attempt. Notes are carved from
// blocks (see [New]).
//
// The pick and Took of a unary attempt run on the attempt's goroutine (a
// unary call picks on its caller's goroutine, Done included, before the
// invoker returns), so its note needs no synchronisation. A stream's may
// not (see [NewShared]). A note is the attempt's context, so a call made
// with it (by an interceptor inside meshless's, by code given a stream's
// context) picks with the note too: a note made [Note.For] a method takes
// the picks for that method only. A call of the same method made with the
// attempt's context while the attempt runs (a mirror) is not told apart:
// its pick is a write the attempt's may race with.
//
// A note is 32 bytes, half a cache line: a call pays for its share of a
// block's allocation and of the collector's work in proportion.
type Note struct {
	context.Context
	picked *Endpoint // the last pick's; a shared note's slot from the start
	method *byte     // the data of the attempt's full method (see For); nil takes every pick
}

// key is the Note's context key.
type key struct{}

// New returns a note for an attempt with ctx, a note no one has had.
//
// Notes are carved from blocks of blockLen, one block per processor at a
// time, so that a call pays for a sixteenth of an allocation, not for one
// (a note is 32 bytes; what an allocation costs is mostly its call, not its
// size). A note is never reused, so a context kept after its attempt stays
// what it was. The price is memory kept reachable, bounded: a note the
// collector cannot free keeps its block, and with it the contexts of up to
// blockLen − 1 other attempts; and each processor's current block keeps
// the contexts of its last attempts (at most blockLen) until its next ones
// replace it, as a client that went idle leaves it.
func New(ctx context.Context) *Note {
	s := &shards[procpin.ID()&shardMask]
	if b := s.b.Load(); b != nil {
		if i := b.next.Add(1) - 1; i < blockLen {
			n := &b.notes[i]
			n.Context = ctx
			return n
		}
	}
	// This processor's block is spent (or it has none yet): a new one, its
	// first note taken before it is shared. Two goroutines that find the
	// block spent at once each make one, and one's is never shared: its
	// other notes are left unused, each note still had by one attempt only.
	b := new(block)
	b.next.Store(1)
	s.b.Store(b)
	n := &b.notes[0]
	n.Context = ctx
	return n
}

// NewShared returns a note for an attempt whose pick and end may run on
// different goroutines: a stream's. gRPC picks a stream's endpoint when the
// stream is made, and again on whichever goroutine sends or receives when
// it retries the stream transparently, while the stream may end on
// another (the caller's receive, its context's end). Its Picked and Took
// hold a lock. It is an allocation of its own; [Shared] is one to embed
// in what a stream allocates anyway.
func NewShared(ctx context.Context) *Note { return new(Shared).Init(ctx) }

// Shared is a shared note's memory (see [NewShared]), to embed in a value
// that holds an attempt's state, so that the note costs no allocation of
// its own: a stream's first attempt's, a hedged stream's copy's.
type Shared struct {
	note Note
	slot slot
}

// Init makes s a note for an attempt with ctx, and returns it. A note is
// had by one attempt only: s must be one no attempt has had (zero), as
// every note [New] and NewShared return is.
func (s *Shared) Init(ctx context.Context) *Note {
	s.note.Context = ctx
	s.slot.self = &s.slot
	s.note.picked = &s.slot.self
	return &s.note
}

// For makes n a note of an attempt of method (a full method name,
// "/pkg.Service/Method", the string gRPC gets and passes on to the pick):
// picks for another method, of calls made with the attempt's context, are
// not noted. It returns n.
func (n *Note) For(method string) *Note {
	n.method = unsafe.StringData(method)
	return n
}

// slot is a shared note's pick, behind a lock. It is the note's picked
// endpoint from the start: Picked finds it there and stores the pick in
// it; Took is passed on to the pick it holds.
type slot struct {
	mu     sync.Mutex
	picked Endpoint
	self   Endpoint // the slot itself: a shared note's picked points here
}

func (s *slot) set(e Endpoint) {
	s.mu.Lock()
	s.picked = e
	s.mu.Unlock()
}

// Took passes the attempt's end to the endpoint last picked.
func (s *slot) Took(err error, took time.Duration) {
	s.mu.Lock()
	e := s.picked
	s.mu.Unlock()
	if e != nil {
		e.Took(err, took)
	}
}

// blockLen is how many notes one allocation makes.
const blockLen = 16

// block is blockLen notes; next is the index of the first not yet had.
type block struct {
	next  atomic.Int32
	notes [blockLen]Note
}

// shard is one processor's current block, alone on its cache lines (128
// bytes: adjacent-line prefetchers pair 64-byte lines).
type shard struct {
	b atomic.Pointer[block]
	_ [120]byte
}

// shards are one per processor when the program started, rounded up to a
// power of two, at most 64; processors added later share them.
var shards = make([]shard, shardCount())

var shardMask = len(shards) - 1

func shardCount() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	return n
}

// Value returns n for the note's key, else the value of its parent context.
func (n *Note) Value(k any) any {
	if _, ok := k.(key); ok {
		return n
	}
	return n.Context.Value(k)
}

// From returns the nearest note in ctx, and nil when it holds none.
func From(ctx context.Context) *Note {
	n, _ := ctx.Value(key{}).(*Note)
	return n
}

// Picked notes the endpoint the attempt was picked to, for any method (see
// [Note.PickedBy]). It allocates (e's copy): a picker calls PickedBy.
func (n *Note) Picked(e Endpoint) { n.PickedBy("", &e) }

// PickedBy notes the endpoint *e, an endpoint's own and never changed,
// that a pick for method chose. gRPC may pick again within one attempt (a
// transparent retry of a stream that no server accepted, a picked
// connection no longer ready): the last pick's endpoint is the one the
// attempt ran on. A pick for another method than the note's (a method "")
// is a call made with the attempt's context, not the attempt: it is not
// noted. The methods are told apart by their strings' data, as gRPC passes
// the attempt's on to its pick: an interceptor that rebuilds the string
// leaves the attempt untimed, never timed as another's.
func (n *Note) PickedBy(method string, e *Endpoint) {
	if n.method != nil && method != "" && n.method != unsafe.StringData(method) {
		return
	}
	if p := n.picked; p != nil {
		if s, ok := (*p).(*slot); ok { // a shared note's
			s.set(*e)
			return
		}
	}
	n.picked = e
}

// Took passes the attempt's error and duration to the endpoint of its last
// pick, if one was noted.
func (n *Note) Took(err error, took time.Duration) {
	if p := n.picked; p != nil {
		(*p).Took(err, took)
	}
}
