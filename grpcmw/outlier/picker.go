package outlier

import (
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/resilience"
)

// picker wraps the child's picker: it hands gRPC the real SubConn and
// records each call's result on its endpoint when the call is done. A pick
// takes no lock and allocates nothing: the counters are atomics per
// endpoint, and the Done function is made once per endpoint (untimed) or
// once per endpoint and tick (timed; see span).
type picker struct {
	child balancer.Picker
	b     *outlierBalancer
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := p.child.Pick(info)
	if err != nil {
		return res, err
	}
	sc, ok := res.SubConn.(*subConn)
	if !ok {
		return res, nil
	}
	res.SubConn = sc.SubConn
	e := sc.ep
	if e == nil {
		return res, nil
	}
	st := p.b.settings.Load()
	done := e.doneFn
	if st.slow > 0 {
		if n := noteOf(info); n != nil {
			n.PickedBy(info.FullMethodName, &e.noted) // the call path times the attempt: see Took
		} else {
			done = e.span(st).fn
		}
	}
	if res.Done == nil {
		res.Done = done
	} else {
		childDone := res.Done
		res.Done = func(di balancer.DoneInfo) {
			childDone(di)
			done(di)
		}
	}
	return res, nil
}

// noteOf returns the note of a pick's attempt (package picknote), nil when
// it has none.
func noteOf(info balancer.PickInfo) *picknote.Note {
	if info.Ctx == nil {
		return nil
	}
	return picknote.From(info.Ctx)
}

// Took counts a call noted at its pick (package picknote) as slow when it
// took longer than the slow-call threshold and its result is not ignored:
// the call path's own readings of the clock time it, from its attempt's
// start, and its Done counts it as an untimed call's does.
func (e *endpoint) Took(err error, took time.Duration) {
	st := e.b.settings.Load()
	if st.slow <= 0 || took <= st.slow {
		return
	}
	if err != nil && st.cls.classify(err) == resultIgnored {
		return
	}
	e.slow.Add(1)
}

// A call whose attempt has no note is timed by the picker. A timed call
// needs its start at its Done, and gRPC gives Done nothing but the call's
// result. Rather than a record per call (an allocation, or a
// pool's get and put), the calls to one endpoint picked within one tick
// share a span, made by the first of them, whose Done function knows when
// the tick ended: a call counts as slow when it ended more than the
// slow-call threshold after the end of the tick it was picked in. So a call
// is never counted slow unless it took longer than the threshold, and one
// that took longer by less than a tick may be missed. A tick is 1/64 of the
// threshold, at most 1 ms (for the default 500 ms threshold, 1 ms: 0.2 %).
//
// Time is read from the monotonic clock alone ([time.Since], about half the
// cost of [time.Now] on a virtual machine, and fake in a testing/synctest
// bubble) when the balancer runs on the system clock, and from its Clock
// otherwise (a Monitor's, in tests).

// span is the calls to one endpoint picked within one tick.
type span struct {
	e   *endpoint
	st  *settings
	end time.Duration // the end of the tick, on st's time line
	fn  func(balancer.DoneInfo)
}

// maxTick is the longest tick: a timed call's duration is exact to it.
const maxTick = time.Millisecond

// tickOf returns the tick for a slow-call threshold.
func tickOf(slow time.Duration) time.Duration {
	return min(max(slow/64, time.Microsecond), maxTick)
}

// since returns the time elapsed on st's time line: since st was made.
func (st *settings) since() time.Duration {
	if st.system {
		return time.Since(st.base)
	}
	return st.clock.Now().Sub(st.base)
}

// span returns the span of the calls picked now to e, making it if the
// current one is older or of older settings.
func (e *endpoint) span(st *settings) *span {
	now := st.since()
	if s := e.cur.Load(); s != nil && s.st == st && now < s.end && now >= s.end-st.tick {
		return s
	}
	s := &span{e: e, st: st, end: now - now%st.tick + st.tick}
	s.fn = s.done
	e.cur.Store(s)
	return s
}

// done records a timed call.
func (s *span) done(di balancer.DoneInfo) {
	slow := s.st.since()-s.end > s.st.slow
	if di.Err == nil {
		s.e.succeeded()
		if slow {
			s.e.slow.Add(1)
		}
		return
	}
	s.e.record(s.st, di.Err, slow)
}

// done records an untimed call.
func (e *endpoint) done(di balancer.DoneInfo) {
	if di.Err == nil { // the common case, without loading the settings
		e.succeeded()
		return
	}
	e.record(e.b.settings.Load(), di.Err, false)
}

func (e *endpoint) succeeded() {
	e.success.Add(1)
	if e.consecutive.Load() != 0 {
		e.consecutive.Store(0)
	}
}

// record counts one call's result; a failure that reaches the
// consecutive-failure threshold wakes the balancer to eject the endpoint.
func (e *endpoint) record(st *settings, err error, slow bool) {
	switch st.cls.classify(err) {
	case resultIgnored:
		return
	case resultSuccess:
		e.succeeded()
	case resultFailure:
		e.failure.Add(1)
		// Wake the balancer at the threshold, and again every threshold
		// failures after it (in case the cap held the endpoint back); and
		// at the first failure past it under new settings: a threshold a
		// reload lowered below the run ejects at the next failure, as
		// grpc-go's outlierdetection judges the counts it has by the config
		// in force at its next evaluation.
		if n := e.consecutive.Add(1); st.consecutive > 0 && n >= st.consecutive && !e.ejected.Load() &&
			((n-st.consecutive)%st.consecutive == 0 || e.wokeBy.Load() != st) {
			e.wokeBy.Store(st)
			e.b.wake()
		}
	}
	if slow {
		e.slow.Add(1)
	}
}

// newSettings returns the call path's settings for a configuration.
func newSettings(cls classifier, clock resilience.Clock, consecutive int64, slow time.Duration) *settings {
	st := &settings{cls: cls, clock: clock, consecutive: consecutive, slow: slow,
		system: clock == resilience.SystemClock(), base: clock.Now()}
	if slow > 0 {
		st.tick = tickOf(slow)
	}
	return st
}
