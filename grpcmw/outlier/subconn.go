package outlier

import (
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// ccWrapper is the ClientConn the child sees: it wraps SubConns and
// pickers.
type ccWrapper struct {
	balancer.ClientConn
	b *outlierBalancer
}

func (w *ccWrapper) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	sc := &subConn{b: w.b, listener: opts.StateListener}
	opts.StateListener = sc.updateState
	inner, err := w.ClientConn.NewSubConn(addrs, opts)
	if err != nil {
		return nil, err
	}
	sc.SubConn = inner
	if len(addrs) > 0 {
		w.b.mu.Lock()
		if e := w.b.endpoints[addrs[0].Addr]; e != nil {
			sc.ep = e
			sc.ejected = e.ejected.Load()
			e.subConns[sc] = struct{}{}
		}
		w.b.mu.Unlock()
	}
	return sc, nil
}

func (w *ccWrapper) RemoveSubConn(sc balancer.SubConn) {
	w.ClientConn.RemoveSubConn(unwrap(sc))
}

func (w *ccWrapper) UpdateAddresses(sc balancer.SubConn, addrs []resolver.Address) {
	w.ClientConn.UpdateAddresses(unwrap(sc), addrs)
}

func (w *ccWrapper) UpdateState(s balancer.State) {
	if s.Picker != nil {
		s.Picker = &picker{child: s.Picker, b: w.b}
	}
	w.ClientConn.UpdateState(s)
}

func unwrap(sc balancer.SubConn) balancer.SubConn {
	if w, ok := sc.(*subConn); ok {
		return w.SubConn
	}
	return sc
}

// subConn wraps a SubConn to know its endpoint and to hide it from the child
// while ejected: the child's health listener then hears TRANSIENT_FAILURE,
// as in gRPC's own outlier detection (gRFC A50). Its fields are under
// b.childMu, except ep, set once.
type subConn struct {
	balancer.SubConn
	b        *outlierBalancer
	ep       *endpoint
	listener func(balancer.SubConnState) // the child's

	ejected        bool
	state          connectivity.State
	health         balancer.SubConnState
	healthSet      bool
	healthListener func(balancer.SubConnState)
	healthGen      uint64
}

// updateState receives the SubConn's connectivity from gRPC.
func (sc *subConn) updateState(s balancer.SubConnState) {
	sc.b.childMu.Lock()
	defer sc.b.childMu.Unlock()
	sc.state = s.ConnectivityState
	if s.ConnectivityState != connectivity.Ready {
		// gRPC drops health listeners when a SubConn leaves READY.
		sc.healthListener, sc.healthSet = nil, false
		sc.healthGen++
	}
	if s.ConnectivityState == connectivity.Shutdown && sc.ep != nil {
		sc.b.mu.Lock()
		delete(sc.ep.subConns, sc)
		sc.b.mu.Unlock()
	}
	if !sc.b.closed && sc.listener != nil {
		sc.listener(s)
	}
}

// RegisterHealthListener is called by the child, under b.childMu.
func (sc *subConn) RegisterHealthListener(l func(balancer.SubConnState)) {
	sc.healthGen++
	gen := sc.healthGen
	sc.healthListener, sc.healthSet = l, false
	if l == nil {
		sc.SubConn.RegisterHealthListener(nil)
		return
	}
	sc.SubConn.RegisterHealthListener(func(s balancer.SubConnState) {
		sc.b.childMu.Lock()
		defer sc.b.childMu.Unlock()
		if sc.b.closed || sc.healthGen != gen {
			return
		}
		sc.health, sc.healthSet = s, true
		if sc.ejected {
			// A listener registered while ejected (the SubConn reconnected
			// during the ejection) hears what setEjected tells one
			// registered before: a child left to believe the endpoint is
			// still connecting would hold every call, rather than fail it,
			// when no other endpoint serves.
			s = ejectedState
		}
		l(s)
	})
}

// ejectedState is what the child hears of an ejected SubConn.
var ejectedState = balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errEjected}

// setEjected hides or shows the SubConn to the child. Called with
// b.childMu held.
func (sc *subConn) setEjected(ejected bool) {
	if sc.ejected == ejected {
		return
	}
	sc.ejected = ejected
	if sc.healthListener == nil || sc.state != connectivity.Ready {
		return
	}
	if ejected {
		sc.healthListener(ejectedState)
	} else if sc.healthSet {
		sc.healthListener(sc.health)
	}
}
