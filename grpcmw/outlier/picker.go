package outlier

import (
	"sync"
	"time"

	"google.golang.org/grpc/balancer"
)

// picker wraps the child's picker: it hands gRPC the real SubConn and
// records each call's result on its endpoint when the call is done. A pick
// takes no lock: the counters are atomics per endpoint.
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
	if st.slow <= 0 {
		if res.Done == nil {
			res.Done = e.doneFn
		} else {
			childDone := res.Done
			res.Done = func(di balancer.DoneInfo) {
				childDone(di)
				e.done(di)
			}
		}
		return res, nil
	}
	c := getCall()
	c.e, c.st, c.child, c.start = e, st, res.Done, st.clock.Now()
	res.Done = c.fn
	return res, nil
}

// call is a timed call in flight; pooled, with its Done function made once.
type call struct {
	e     *endpoint
	st    *settings
	child func(balancer.DoneInfo)
	start time.Time
	fn    func(balancer.DoneInfo)
}

var callPool sync.Pool

func getCall() *call {
	if c, ok := callPool.Get().(*call); ok {
		return c
	}
	c := new(call)
	c.fn = c.done
	return c
}

func (c *call) done(di balancer.DoneInfo) {
	e, st, child := c.e, c.st, c.child
	d := st.clock.Now().Sub(c.start)
	*c = call{fn: c.fn}
	callPool.Put(c)
	if child != nil {
		child(di)
	}
	e.record(st, di.Err, d > st.slow)
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
		// failures after it (in case the cap held the endpoint back).
		if n := e.consecutive.Add(1); st.consecutive > 0 && n >= st.consecutive &&
			(n-st.consecutive)%st.consecutive == 0 && !e.ejected.Load() {
			e.b.wake()
		}
	}
	if slow {
		e.slow.Add(1)
	}
}
