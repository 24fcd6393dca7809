package bulkhead

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/resilience"
)

// checkQuotas fails unless no shard holds more free permits than its quota
// and the quotas add up to the limit.
func checkQuotas(t *testing.T, s *slots) {
	t.Helper()
	sum := 0
	for j := range s.shards {
		sh := &s.shards[j]
		if sh.quota < 1 {
			t.Fatalf("shard %d: quota %d, want at least 1", j, sh.quota)
		}
		if free := sh.w.Load() & freeMask; free > sh.quota {
			t.Fatalf("shard %d: %d free permits, above its quota %d", j, free, sh.quota)
		}
		sum += int(sh.quota)
	}
	if sum != s.limit {
		t.Fatalf("quotas add up to %d, want the limit %d", sum, s.limit)
	}
}

func TestNewSlotsShards(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, limit := range []int{1, 2, 3, 5, 16, 100, maxSlotsLimit} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := newSlots(limit)
			n := len(s.shards)
			if n&(n-1) != 0 || n > maxShards || n > limit || s.mask != n-1 {
				t.Fatalf("%d shards (mask %d), want a power of two, at most %d and at most the limit", n, s.mask, maxShards)
			}
			if want := min(procs, maxShards, limit); n < want && 2*n <= limit {
				t.Errorf("%d shards for %d processors and limit %d, want at least %d", n, procs, limit, want)
			}
			checkQuotas(t, s)
			if s.held() != 0 {
				t.Errorf("held = %d on a new semaphore, want 0", s.held())
			}
		})
	}
}

// Sequentially, from any shards in any order, the semaphore is exact: an
// acquire succeeds iff fewer than limit permits are out, a release of a
// permit that is out always succeeds, one more release than acquires is
// refused (a double end) and changes nothing, and held counts the permits
// out.
func TestSlotsModel(t *testing.T) {
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 3))
		limit := 1 + rnd.IntN(40)
		n := 1 << rnd.IntN(5)
		for n > limit {
			n /= 2
		}
		s := newSlotsN(limit, n)
		held := 0
		for step := range 2000 {
			i := rnd.IntN(n)
			if rnd.IntN(2) == 0 {
				got, want := s.tryAcquireAt(i), held < limit
				if got != want {
					t.Fatalf("seed %d (limit %d, %d shards), step %d: acquire at shard %d with %d out = %v, want %v", seed, limit, n, step, i, held, got, want)
				}
				if got {
					held++
				}
			} else {
				got, want := s.releaseAt(i), held > 0
				if got != want {
					t.Fatalf("seed %d (limit %d, %d shards), step %d: release at shard %d with %d out = %v, want %v", seed, limit, n, step, i, held, got, want)
				}
				if got {
					held--
				}
			}
			if s.held() != held {
				t.Fatalf("seed %d, step %d: held = %d, want %d", seed, step, s.held(), held)
			}
			checkQuotas(t, s)
		}
	}
}

// withHook sets testHookScanned for the test.
func withHook(t *testing.T, f func(j int)) {
	t.Cleanup(func() { testHookScanned = nil })
	testHookScanned = f
}

// mover is a worker that holds one permit of a two-shard semaphore of limit
// 2 and moves the other (the free one, or the room for one) between the
// shards by giving its own back on one side and taking one on the other.
type mover struct {
	t *testing.T
	s *slots
}

// free moves the free permit from shard from to shard to: at every instant
// at least one permit is free.
func (m mover) free(from, to int) {
	if !m.s.releaseAt(to) || !m.s.tryAcquireAt(from) {
		m.t.Fatalf("moving the free permit from shard %d to %d failed", from, to)
	}
}

// room moves the room for a permit from shard from to shard to: at every
// instant at least one permit is out.
func (m mover) room(from, to int) {
	if !m.s.tryAcquireAt(to) || !m.s.releaseAt(from) {
		m.t.Fatalf("moving the room from shard %d to %d failed", from, to)
	}
}

// A call whose own shard is empty looks at the others; while it looks, a
// worker keeps the one free permit just where it is not looking. A single
// look would refuse the call although a permit was free at every instant:
// the second look sees that the shards changed, and the call looks again
// and gets the permit.
func TestSlotsAcquireFindsAPermitThatMoved(t *testing.T) {
	s := newSlotsN(2, 2) // quotas 1 and 1
	if !s.tryAcquireAt(1) {
		t.Fatal("the worker's acquire was refused")
	}
	// Shard 0 holds the free permit, shard 1 none. The call starts at
	// shard 1 and looks at shard 0, then shard 1.
	m := mover{t, s}
	passes := 0
	withHook(t, func(j int) {
		switch {
		case j == -1:
			passes++
			if passes == 1 {
				m.free(0, 1) // away from shard 0, which it looks at first
			}
		case j == 0 && passes == 1:
			m.free(1, 0) // back, once it has looked
		}
	})
	if !s.tryAcquireAt(1) {
		t.Fatal("the call was refused although a permit was free at every instant")
	}
	if passes != 2 {
		t.Fatalf("%d passes over the shards, want 2 (the second after the change)", passes)
	}
	if s.held() != 2 {
		t.Fatalf("held = %d, want 2", s.held())
	}
}

// The same for a release whose own shard is at its quota: while it looks
// for room, a worker keeps the room just where it is not looking. A single
// look would see every shard at its quota and take the release for a double
// end (a false panic); the second look sees the change.
func TestSlotsReleaseFindsRoomThatMoved(t *testing.T) {
	s := newSlotsN(2, 2)
	if !s.tryAcquireAt(1) { // the call's permit: shard 0 full, shard 1 has room
		t.Fatal("the call's acquire was refused")
	}
	m := mover{t, s}
	passes := 0
	withHook(t, func(j int) {
		switch {
		case j == -1:
			passes++
			if passes == 1 {
				m.room(1, 0) // the call looks at shard 1 first
			}
		case j == 1 && passes == 1:
			m.room(0, 1)
		}
	})
	if !s.releaseAt(0) {
		t.Fatal("a release of a permit that was out was refused as a double end")
	}
	if passes != 2 {
		t.Fatalf("%d passes over the shards, want 2", passes)
	}
	if s.held() != 0 {
		t.Fatalf("held = %d, want 0", s.held())
	}
	checkQuotas(t, s)
}

// When the shards change under every look, a call gives up after
// maxRounds looks: an acquire is refused (the bulkhead is at its limit and
// busy), a release goes to its own shard, so that no permit is lost.
func TestSlotsGiveUpAfterMaxRounds(t *testing.T) {
	t.Run("acquire", func(t *testing.T) {
		s := newSlotsN(1, 1)
		if !s.tryAcquireAt(0) {
			t.Fatal("the worker's acquire was refused")
		}
		passes := 0
		withHook(t, func(j int) {
			if j == -1 {
				passes++
				return
			}
			// The worker gives its permit back and takes it again.
			if !s.releaseAt(0) || !s.tryAcquireAt(0) {
				t.Fatal("the worker's release and acquire failed")
			}
		})
		if s.tryAcquireAt(0) {
			t.Fatal("the call got a permit while the worker held the only one")
		}
		if passes != maxRounds {
			t.Fatalf("%d passes, want %d", passes, maxRounds)
		}
		if s.held() != 1 {
			t.Fatalf("held = %d, want the worker's 1", s.held())
		}
	})
	t.Run("release", func(t *testing.T) {
		s := newSlotsN(2, 2)
		if !s.tryAcquireAt(1) {
			t.Fatal("the call's acquire was refused")
		}
		m := mover{t, s}
		passes := 0
		withHook(t, func(j int) {
			switch j {
			case -1:
				passes++
				m.room(1, 0)
			case 1:
				m.room(0, 1)
			}
		})
		if !s.releaseAt(0) {
			t.Fatal("the release was refused")
		}
		testHookScanned = nil
		if passes != maxRounds {
			t.Fatalf("%d passes, want %d", passes, maxRounds)
		}
		if s.held() != 0 {
			t.Fatalf("held = %d after every permit came back, want 0", s.held())
		}
		for k := range 2 {
			if !s.tryAcquireAt(0) {
				t.Fatalf("acquire %d of 2 refused: a permit was lost", k+1)
			}
		}
		if s.tryAcquireAt(1) {
			t.Fatal("a third permit was granted: one was made up")
		}
	})
}

// A call refused after two agreeing passes marks the semaphore full; the
// calls after it are refused on the mark without looking at a shard, and a
// release takes the mark away, so that the next call finds the permit on
// another processor's shard.
func TestSlotsFullIsMarked(t *testing.T) {
	s := newSlotsN(2, 2)
	if !s.tryAcquireAt(0) || !s.tryAcquireAt(1) {
		t.Fatal("taking both permits failed")
	}
	looks := 0
	withHook(t, func(j int) {
		if j >= 0 {
			looks++
		}
	})
	if s.tryAcquireAt(0) {
		t.Fatal("a third permit was granted")
	}
	if looks != 2 || !s.full.Load() {
		t.Fatalf("the first refusal looked at %d shards (want 2, before its second pass, their sum) and marked full = %v (want true)", looks, s.full.Load())
	}
	looks = 0
	for i := range 2 {
		if s.tryAcquireAt(i) {
			t.Fatalf("a permit was granted at shard %d while both were out", i)
		}
	}
	if looks != 0 {
		t.Fatalf("refusals on the mark looked at %d shards, want none", looks)
	}
	if !s.releaseAt(1) {
		t.Fatal("the release was refused")
	}
	if s.full.Load() {
		t.Fatal("still marked full after a release")
	}
	if !s.tryAcquireAt(0) {
		t.Fatal("refused at shard 0 although shard 1 had a free permit")
	}
	if s.held() != 2 {
		t.Fatalf("held = %d, want 2", s.held())
	}
}

// A permit given back between the marking call's passes and its mark comes
// from a release that read no mark, and so took none away: the marking
// call's look after the mark finds the permit and takes the mark back. (Given
// back just after the mark, the release takes it away itself.) Either way
// the call is refused, rightly — the shards were empty between its passes
// — and no free permit stays under a mark.
func TestSlotsAMarkLooksAgain(t *testing.T) {
	for _, v := range []struct {
		name string
		at   int
	}{{"release-before-the-mark", markBefore}, {"release-after-the-mark", markAfter}} {
		t.Run(v.name, func(t *testing.T) {
			s := newSlotsN(2, 2)
			if !s.tryAcquireAt(0) || !s.tryAcquireAt(1) {
				t.Fatal("taking both permits failed")
			}
			released := false
			withHook(t, func(j int) {
				if j == v.at && !released {
					released = true
					if !s.releaseAt(1) {
						t.Error("the release was refused")
					}
				}
			})
			if s.tryAcquireAt(0) {
				t.Fatal("the call got a permit although the shards were empty between its passes")
			}
			if !released {
				t.Fatal("the call did not mark the semaphore full")
			}
			if s.full.Load() {
				t.Fatal("marked full with a free permit")
			}
			if !s.tryAcquireAt(0) {
				t.Fatal("the free permit was refused")
			}
		})
	}
}

// Many goroutines on every processor take and give back permits as fast as
// they can: never more than the limit are out, and at the end every permit
// is back (exactly limit can be taken again).
func TestSlotsConcurrent(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 7, 64} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := newSlots(limit)
			var out, peak atomic.Int64
			var wg sync.WaitGroup
			for range 4 * runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					for k := range 2000 {
						if !s.tryAcquire() {
							continue
						}
						n := out.Add(1)
						if n > int64(limit) {
							t.Errorf("%d permits out, above the limit %d", n, limit)
						}
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						if k%7 == 0 {
							runtime.Gosched() // move to another processor, sometimes
						}
						out.Add(-1)
						if !s.release() {
							t.Error("a release was refused as a double end")
						}
					}
				})
			}
			wg.Wait()
			if s.held() != 0 {
				t.Fatalf("held = %d after every permit came back", s.held())
			}
			if s.full.Load() {
				t.Fatal("marked full after every permit came back")
			}
			for k := range limit {
				if !s.tryAcquire() {
					t.Fatalf("acquire %d of %d refused afterwards", k+1, limit)
				}
			}
			if s.tryAcquire() {
				t.Fatal("one more than the limit was granted afterwards")
			}
			t.Logf("limit %d: at most %d out at once", limit, peak.Load())
		})
	}
}

// A fixed bulkhead's gate gives a permit back to the shard its Enter took
// it from, which the permit names (one processor lookup per call, not two),
// and to its own processor's shard when the permit names none of its own.
func TestExitGivesBackToEntersShard(t *testing.T) {
	b, err := New(WithConfig(Config{MaxConcurrentCalls: 4}))
	if err != nil {
		t.Fatal(err)
	}
	b.slots = newSlotsN(4, 2) // two shards of 2, whatever GOMAXPROCS is
	s := b.slots
	free := func(j int) uint64 { return s.shards[j].w.Load() & freeMask }
	_, pm, err := b.Enter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sh, ok := pm.Ref.(*shard)
	if !ok || sh.owner != s {
		t.Fatalf("the permit's Ref is %T %v, want one of the bulkhead's shards", pm.Ref, pm.Ref)
	}
	h, o := sh.i, 1-sh.i
	if free(h) != 1 {
		t.Fatalf("shard %d (Enter's) has %d free, want 1", h, free(h))
	}
	if !s.tryAcquireAt(o) { // a second permit, from the other shard
		t.Fatal("the other shard refused")
	}
	// Exit is handed the other shard: the permit goes back there, wherever
	// the goroutine runs.
	if err := b.Exit(t.Context(), resilience.Permit{Ref: &s.shards[o]}, resilience.Result{}); err != nil {
		t.Fatal(err)
	}
	if free(o) != 2 || free(h) != 1 {
		t.Fatalf("after Exit: shard %d has %d free, shard %d %d; want 2 and 1", o, free(o), h, free(h))
	}
	// Another bulkhead's shard is not this one's: the permit goes to the
	// processor's own shard (or on to the one with room).
	other, _ := New(WithConfig(Config{MaxConcurrentCalls: 8}))
	other.slots = newSlotsN(8, 4) // shard 3 has no namesake here
	if err := b.Exit(t.Context(), resilience.Permit{Ref: &other.slots.shards[3]}, resilience.Result{}); err != nil {
		t.Fatal(err)
	}
	if b.slots.held() != 0 || other.slots.held() != 0 {
		t.Fatalf("held %d here, %d in the other bulkhead; want none", b.slots.held(), other.slots.held())
	}
	checkQuotas(t, s)
}
