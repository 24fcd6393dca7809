// Package sysclock reads the system clock for the per-call paths at the
// cost of one clock read instead of two.
//
// [time.Now] reads two clocks on Linux (the wall clock, then the monotonic
// one: two vDSO calls, about 50 ns together on a virtual machine whose
// clock source is kvm-clock); [time.Since] reads the monotonic clock alone.
// [Now] keeps a reading of time.Now as an anchor and returns the anchor
// advanced by the monotonic time since it: the monotonic part of its
// reading is the clock's own, to the nanosecond, and so is everything a
// duration, a deadline or a comparison of two readings is made of. The
// wall-clock part is the anchor's advanced by the same amount. The
// system's wall and monotonic clocks advance together (NTP slews both); they
// part only when the wall clock is stepped (set by hand or by NTP, a leap
// second, a machine resumed from suspend), and a reading then keeps the old
// wall clock until the anchor is renewed, at most [Refresh] of monotonic
// time later.
//
// Inside a testing/synctest bubble time.Now carries no monotonic reading
// and Now returns exactly what time.Now does: an anchor read in one clock
// domain (a bubble's fake time, the real time) lies decades away from the
// other's readings and is never used there.
package sysclock
