package ratelimiter

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

func TestNewShards(t *testing.T) {
	for _, limit := range []int{1, 2, 3, 5, 50, 1 << 30} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := newShards(limit, time.Second)
			n := len(s.s)
			if n&(n-1) != 0 || n > maxShards || n > limit || s.mask != n-1 {
				t.Fatalf("%d shards (mask %d), want a power of two, at most %d and at most the limit", n, s.mask, maxShards)
			}
			if want := min(runtime.GOMAXPROCS(0), maxShards, limit); n < want && 2*n <= limit {
				t.Errorf("%d shards for %d processors, want at least %d", n, runtime.GOMAXPROCS(0), want)
			}
			sum := int64(0)
			for i := range s.s {
				if s.s[i].quota < 1 || s.s[i].free != s.s[i].quota {
					t.Fatalf("shard %d: quota %d, free %d; want a full quota of at least 1", i, s.s[i].quota, s.s[i].free)
				}
				sum += s.s[i].quota
			}
			if sum != int64(limit) {
				t.Fatalf("quotas add up to %d, want %d", sum, limit)
			}
		})
	}
}

// Sequentially, from any shards, with periods that only move forward, the
// permits are exact: a call is admitted iff fewer than limitForPeriod calls
// were admitted in its period, and a new period starts with every permit,
// whatever the last one left.
func TestShardsModel(t *testing.T) {
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 5))
		limit := 1 + rnd.IntN(30)
		n := 1 << rnd.IntN(5)
		for n > limit {
			n /= 2
		}
		s := newShardsN(limit, time.Second, n)
		e, admitted := int64(0), 0
		for step := range 3000 {
			if rnd.IntN(40) == 0 {
				e += 1 + int64(rnd.IntN(3))
				admitted = 0
			}
			i := rnd.IntN(n)
			got, want := s.tryAcquireAt(i, e), admitted < limit
			if got != want {
				t.Fatalf("seed %d (limit %d, %d shards), step %d: period %d, shard %d, %d admitted: got %v, want %v",
					seed, limit, n, step, e, i, admitted, got, want)
			}
			if got {
				admitted++
			}
		}
	}
}

// A call that read the clock just before a newer period began, and comes to
// a shard already in the newer period, takes a permit of the newer period:
// a shard never goes back, so that no period admits more than the limit.
func TestShardsNeverGoBackAPeriod(t *testing.T) {
	s := newShardsN(4, time.Second, 2) // quotas 2 and 2
	for range 4 {
		if !s.tryAcquireAt(0, 0) {
			t.Fatal("period 0: a permit was refused")
		}
	}
	// Period 1 begins: shard 1 is refilled by a call of period 1.
	if !s.tryAcquireAt(1, 1) {
		t.Fatal("period 1: a permit was refused")
	}
	// A late call of period 0 finds shard 1 in period 1: it takes a permit
	// of period 1 there (period 0's are spent), and shard 1 stays in period 1.
	admitted := 1
	for range 10 {
		if s.tryAcquireAt(1, 0) {
			admitted++
		}
	}
	for range 10 {
		if s.tryAcquireAt(0, 1) {
			admitted++
		}
	}
	if admitted != 4 {
		t.Fatalf("%d calls admitted in period 1 (late calls of period 0 included), want the limit 4", admitted)
	}
}

// A pick of a permit, and its refusal, allocate nothing.
func TestShardsAllocateNothing(t *testing.T) {
	s := newShards(1, time.Hour)
	if n := testing.AllocsPerRun(1000, func() { s.tryAcquire() }); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}
