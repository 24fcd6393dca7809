package picknote_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/picknote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// endpoint records what it was told.
type endpoint struct {
	calls int
	err   error
	took  time.Duration
}

func (e *endpoint) Took(err error, took time.Duration) { e.calls, e.err, e.took = e.calls+1, err, took }

type ctxKey string

// A note is found through the contexts derived from it, passes its
// parent's values, deadline and cancellation through, and gives the
// attempt's end to the endpoint of its last pick only.
func TestANoteReachesTheEndpointOfItsLastPick(t *testing.T) {
	parent, cancel := context.WithTimeout(context.WithValue(t.Context(), ctxKey("k"), "v"), time.Hour)
	n := picknote.New(parent)
	var ctx context.Context = n
	ctx = context.WithValue(ctx, ctxKey("inner"), 1) // gRPC derives the pick's context from the attempt's
	ctx, cancelInner := context.WithCancel(ctx)
	defer cancelInner()
	if picknote.From(ctx) != n {
		t.Fatal("From did not find the note through the contexts derived from it")
	}
	if got := ctx.Value(ctxKey("k")); got != "v" {
		t.Fatalf("a parent's value through the note = %v, want v", got)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("the parent's deadline through the note = %v, %v", dl, ok)
	}
	first, last := new(endpoint), new(endpoint)
	n.Picked(first)
	n.Picked(last) // a transparent retry picked again
	errDown := errors.New("down")
	n.Took(errDown, 3*time.Millisecond)
	if first.calls != 0 || last.calls != 1 || last.err != errDown || last.took != 3*time.Millisecond {
		t.Fatalf("first %+v, last %+v: want the last pick's endpoint told once, with the error and 3ms", first, last)
	}
	cancel()
	select {
	case <-ctx.Done():
	case <-t.Context().Done():
		t.Fatal("the parent's cancellation did not reach a context derived from the note")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("ctx.Err() = %v, want context.Canceled", ctx.Err())
	}
}

// A context with no note gives none, and a note with no pick tells no one.
func TestNoNoteNoPick(t *testing.T) {
	if picknote.From(t.Context()) != nil {
		t.Fatal("From found a note in a context without one")
	}
	picknote.New(t.Context()).Took(nil, time.Second) // must not panic
	outer := picknote.New(t.Context())
	inner := picknote.New(outer)
	if picknote.From(inner) != inner {
		t.Fatal("From did not return the nearest note")
	}
}

// A context derived with a cancel from a note joins its parent's
// cancellation directly: it starts no goroutine to watch the parent, as it
// would for a parent context of a type the context package did not
// recognise through Value.
func TestACancelBelowANoteStartsNoGoroutine(t *testing.T) {
	parent, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := picknote.New(parent)
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 100 {
		_, c := context.WithCancel(n)
		cancels = append(cancels, c)
	}
	if after := runtime.NumGoroutine(); after >= before+100 {
		t.Fatalf("%d goroutines after deriving 100 cancel contexts from a note, %d before", after, before)
	}
	for _, c := range cancels {
		c()
	}
}

var sink context.Context

// Notes come sixteen to an allocation; finding one and noting a pick
// allocate nothing. (AllocsPerRun runs on one processor, so the sixteen
// notes of a run come from one block, or from two that a run's first note
// ends and its last starts: one allocation a run either way.)
func TestSixteenNotesAreOneAllocation(t *testing.T) {
	var e picknote.Endpoint = new(endpoint) // its own, as a picker's endpoint holds it
	ctx := context.WithValue(t.Context(), ctxKey("k"), "v")
	if n := testing.AllocsPerRun(1000, func() {
		for range 16 {
			note := picknote.New(ctx)
			sink = note // as the attempt's context, handed to gRPC, does
			picknote.From(sink).PickedBy("", &e)
			note.Took(nil, time.Millisecond)
		}
	}); n != 1 {
		t.Fatalf("%v allocations per 16 notes, want 1", n)
	}
}

// Every note is had by one attempt only, however many goroutines make them
// at once, and a note kept after its attempt stays its attempt's context:
// notes are carved from shared blocks, never reused.
func TestANoteIsNeverHandedOutTwice(t *testing.T) {
	const goroutines, each = 8, 2000
	notes := make([][]*picknote.Note, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx := context.WithValue(t.Context(), ctxKey("g"), g)
			for range each {
				n := picknote.New(ctx)
				n.Picked(new(endpoint)) // a write a shared note would race on (-race)
				notes[g] = append(notes[g], n)
			}
		})
	}
	wg.Wait()
	seen := make(map[*picknote.Note]bool, goroutines*each)
	for g, ns := range notes {
		for _, n := range ns {
			if seen[n] {
				t.Fatalf("note %p handed out twice", n)
			}
			seen[n] = true
			if got := n.Value(ctxKey("g")); got != g {
				t.Fatalf("a note of goroutine %d holds the context of goroutine %v", g, got)
			}
		}
	}
}

// countingEndpoint counts what it is told; it may be told from any
// goroutine.
type countingEndpoint struct {
	mu    sync.Mutex
	calls int
	took  time.Duration
}

func (e *countingEndpoint) Took(_ error, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls, e.took = e.calls+1, took
}

// A shared note (a stream's) is picked on one goroutine and again on
// others (transparent retries) while its attempt ends on yet another: the
// end reaches the endpoint of the last pick, once, and -race sees no race.
// Its context is its parent's, as a note's.
func TestASharedNoteIsPickedAndEndedOnOtherGoroutines(t *testing.T) {
	for range 200 {
		n := picknote.NewShared(context.WithValue(t.Context(), ctxKey("k"), "v"))
		if picknote.From(n) != n || n.Value(ctxKey("k")) != "v" {
			t.Fatal("a shared note is not found, or does not pass its parent's values")
		}
		first, last := new(countingEndpoint), new(countingEndpoint)
		picked := make(chan struct{})
		go func() {
			n.Picked(first) // the pick when the stream is made
			close(picked)
		}()
		<-picked // what the caller learns: its stream was made
		repicked := make(chan struct{})
		go func() {
			n.Picked(last) // a transparent retry, on a sending goroutine
			close(repicked)
		}()
		var ended sync.WaitGroup
		ended.Go(func() {
			<-repicked // the stream ends after the retry's pick
			n.Took(nil, 5*time.Millisecond)
		})
		ended.Wait()
		if first.calls != 0 || last.calls != 1 || last.took != 5*time.Millisecond {
			t.Fatalf("first told %d times, last %d times (%v): want the last pick's endpoint told once, 5ms", first.calls, last.calls, last.took)
		}
	}
	picknote.NewShared(t.Context()).Took(nil, time.Second) // no pick: tells no one, no panic
}

// A shared note in the memory of what holds its attempt's state costs no
// allocation: Init, the pick and the end allocate nothing.
func TestASharedNoteInItsHoldersMemoryAllocatesNothing(t *testing.T) {
	counting := new(countingEndpoint)
	var e picknote.Endpoint = counting // its own, as a picker's endpoint holds it
	holders := make([]struct {
		other int
		note  picknote.Shared
	}, 1001)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		note := holders[i].note.Init(t.Context())
		i++
		sink = note
		picknote.From(sink).PickedBy("", &e)
		note.Took(nil, time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per shared note in its holder's memory, want 0", n)
	}
	if counting.calls != 1001 {
		t.Fatalf("the endpoint was told %d times, want 1001", counting.calls)
	}
}

// The end and a pick of a shared note may also race: the pick may come
// while the end is told (a retry's pick in flight when the context ended).
// Either endpoint is then told, once; -race sees no data race.
func TestASharedNotesEndMayRaceItsPick(t *testing.T) {
	for range 200 {
		n := picknote.NewShared(t.Context())
		a, b := new(countingEndpoint), new(countingEndpoint)
		n.Picked(a)
		var wg sync.WaitGroup
		wg.Go(func() { n.Picked(b) })
		wg.Go(func() { n.Took(nil, time.Millisecond) })
		wg.Wait()
		if a.calls+b.calls != 1 {
			t.Fatalf("told %d + %d times, want once", a.calls, b.calls)
		}
	}
}

func ExampleNote() {
	note := picknote.New(context.Background())
	// … the attempt runs with note as its context; the picker notes the
	// endpoint it picked:
	if n := picknote.From(note); n != nil {
		n.Picked(printer{})
	}
	// … and when the attempt has ended, the call path passes its time on:
	note.Took(nil, 3*time.Millisecond)
	// Output: took 3ms, err <nil>
}

type printer struct{}

func (printer) Took(err error, took time.Duration) { fmt.Printf("took %v, err %v\n", took, err) }
