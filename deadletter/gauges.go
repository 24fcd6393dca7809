package deadletter

import "sync"

// A key's gauges (waiting, parked, oldest) are the store's figures, read
// after each round, plus what this queue did since: deferrals and requeues
// add a waiting entry, purges and requeues take a parked one away. The
// store stays the authority (it is shared by the queues of every
// instance), but its reading races this queue's own writes: a deferral can
// land after the read and be counted before the reading is stored, which
// would erase it, and a purge can land before the read and be counted
// after the reading is stored, which would count it twice.
//
// gaugeBook orders the two. A write that adds an entry and is counted
// while a read is in flight is added to the reading too: the read may have
// missed it. A write that removes an entry and is counted after a reading
// was stored that began while the write was in flight is not counted: the
// read may have seen it. An entry whose write overlapped a read is thus
// counted as present: a gauge may be one too high per such write until
// the next round, never one too low, so that [Queue.Pending] never says
// none while an entry waits.
type gaugeBook struct {
	mu      sync.Mutex
	reading bool   // a round's read of the store's figures is in flight
	added   int64  // waiting entries added during that read
	oldest  int64  // the oldest of them (UnixNano); 0: none
	stored  uint64 // readings stored so far
}

// start is called before a write that removes a parked entry (a requeue, a
// purge), and its result passed to the write's count.
func (ks *keyState) start() uint64 {
	ks.book.mu.Lock()
	defer ks.book.mu.Unlock()
	return ks.book.stored
}

// added counts a waiting entry added by this queue, enqueued at enq
// (UnixNano).
func (ks *keyState) added(enq int64) {
	ks.book.mu.Lock()
	defer ks.book.mu.Unlock()
	ks.addedLocked(enq)
}

func (ks *keyState) addedLocked(enq int64) {
	b := &ks.book
	ks.waiting.Add(1)
	ks.oldest.CompareAndSwap(0, enq)
	if b.reading {
		b.added++
		b.oldest = oldestOf(b.oldest, enq)
	}
}

// unparked counts a parked entry removed by this queue; started is what
// [keyState.start] returned before the write.
func (ks *keyState) unparked(started uint64) {
	ks.book.mu.Lock()
	defer ks.book.mu.Unlock()
	ks.unparkedLocked(started)
}

func (ks *keyState) unparkedLocked(started uint64) {
	if ks.book.stored != started {
		return // a reading stored meanwhile may have seen the removal
	}
	if p := ks.parked.Load(); p > 0 {
		ks.parked.Store(p - 1)
	}
}

// requeued counts a parked entry moved back to the waiting ones, enqueued
// at enq; started is what [keyState.start] returned before the write.
func (ks *keyState) requeued(started uint64, enq int64) {
	ks.book.mu.Lock()
	defer ks.book.mu.Unlock()
	ks.unparkedLocked(started)
	ks.addedLocked(enq)
}

// reading marks the start of a read of the store's figures. One read at a
// time: only the key's goroutine reads them.
func (ks *keyState) reading() {
	ks.book.mu.Lock()
	defer ks.book.mu.Unlock()
	ks.book.reading, ks.book.added, ks.book.oldest = true, 0, 0
}

// read stores the store's figures st, read since [keyState.reading], or
// ends the read without storing anything when ok is false (the read
// failed).
func (ks *keyState) read(st Stats, ok bool) {
	b := &ks.book
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	if !ok {
		return
	}
	b.stored++
	ks.waiting.Store(int64(st.Waiting) + b.added)
	ks.parked.Store(int64(st.Parked))
	var oldest int64
	if !st.Oldest.IsZero() {
		oldest = st.Oldest.UnixNano()
	}
	ks.oldest.Store(oldestOf(oldest, b.oldest))
}

// oldestOf returns the older of two UnixNano times, 0 standing for none.
func oldestOf(a, b int64) int64 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}
