package outlier

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/meshless/meshless/resilience"
)

// Listener is told when an endpoint is ejected and when it returns. Its
// methods are called from the balancer's goroutines, with none of the
// balancer's locks held but the one that puts one balancer's calls in the
// order of its changes (a return never comes before the ejection it ends);
// the balancers of several channels call it concurrently. They must be fast
// and must not block. addr is the
// endpoint's address as the resolver gave it; reason is one of the Reason…
// constants.
//
// A panic in a method is not recovered: it goes on up the goroutine that
// called it, gRPC's or the balancer's (which ends the program), or the one
// that fires the clock's timers (a fake clock's Advance, in a test). The
// Monitor records the change all the same, and the balancer tells the
// changes queued after it at its next change or sweep.
//
// otelmw.OutlierListener records these as the meshless.outlier.* metrics.
type Listener interface {
	Ejected(addr, reason string)
	Returned(addr string)
}

// Monitor connects Go code to the balancers that gRPC builds: it supplies
// their clock and [Listener], and reports which endpoints they have ejected.
// A balancer uses the Monitor that its [Config.Monitor] names; create the
// Monitor first, put its [Monitor.Name] in the Config, then build the service
// config with [ServiceConfigJSON]. One Monitor may serve several channels.
//
// Monitors are kept, until [Monitor.Close], in a registry private to this
// package and bounded to [MaxMonitors]. A Monitor is safe for concurrent use.
type Monitor struct {
	name     string
	clock    resilience.Clock
	listener Listener

	mu      sync.Mutex
	ejected map[string]int // address → balancers that have it ejected
	closed  bool
}

// MaxMonitors is how many Monitors may be open at once.
const MaxMonitors = 1024

// ErrTooManyMonitors is returned by [NewMonitor] when [MaxMonitors] are open.
var ErrTooManyMonitors = errors.New("outlier: too many open monitors")

// registry holds the open monitors by name.
var registry struct {
	mu   sync.Mutex
	byID map[string]*Monitor
	seq  atomic.Uint64
}

// MonitorOption configures a [Monitor].
type MonitorOption interface{ apply(*Monitor) }

type monitorOptionFunc func(*Monitor)

func (f monitorOptionFunc) apply(m *Monitor) { f(m) }

// WithClock sets the clock that the balancers use for their interval timer,
// ejection times and call durations. Default [resilience.SystemClock].
func WithClock(c resilience.Clock) MonitorOption {
	return monitorOptionFunc(func(m *Monitor) {
		if c != nil {
			m.clock = c
		}
	})
}

// WithListener sets the listener told of ejections and returns. Default
// none.
func WithListener(l Listener) MonitorOption {
	return monitorOptionFunc(func(m *Monitor) { m.listener = l })
}

// NewMonitor returns an open Monitor with a unique name. It fails only when
// [MaxMonitors] are open.
func NewMonitor(opts ...MonitorOption) (*Monitor, error) {
	m := &Monitor{clock: resilience.SystemClock(), ejected: map[string]int{}}
	for _, o := range opts {
		if o != nil {
			o.apply(m)
		}
	}
	m.name = "monitor-" + strconv.FormatUint(registry.seq.Add(1), 10)
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if len(registry.byID) >= MaxMonitors {
		return nil, ErrTooManyMonitors
	}
	if registry.byID == nil {
		registry.byID = map[string]*Monitor{}
	}
	registry.byID[m.name] = m
	return m, nil
}

// lookupMonitor returns the open Monitor named name.
func lookupMonitor(name string) (*Monitor, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m, ok := registry.byID[name]
	return m, ok
}

// Name returns the name to put in [Config.Monitor].
func (m *Monitor) Name() string { return m.name }

// Ejected returns the addresses that are ejected now, sorted.
func (m *Monitor) Ejected() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.ejected))
	for a := range m.ejected {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// IsEjected reports whether addr is ejected now.
func (m *Monitor) IsEjected(addr string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ejected[addr] > 0
}

// Close removes the Monitor from the registry: a service config that names it
// no longer parses. Balancers that already use it keep their clock but stop
// telling its listener. Close is idempotent.
func (m *Monitor) Close() {
	registry.mu.Lock()
	delete(registry.byID, m.name)
	registry.mu.Unlock()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// eject and unject tell the listener of a balancer's ejection and return of
// addr, then record it, so that whoever sees the change in Ejected knows
// the listener has been told. The record is deferred: a listener that
// panics (the panic goes on up) still leaves Ejected as the balancer has
// it. They are called with no lock held.
func (m *Monitor) eject(addr, reason string) {
	defer m.record(addr, 1)
	if m.listening() {
		m.listener.Ejected(addr, reason)
	}
}

func (m *Monitor) unject(addr string) {
	defer m.record(addr, -1)
	if m.listening() {
		m.listener.Returned(addr)
	}
}

// record counts one more (delta 1) or one fewer (-1) balancer that has addr
// ejected.
func (m *Monitor) record(addr string, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.ejected[addr] + delta; n > 0 {
		m.ejected[addr] = n
	} else {
		delete(m.ejected, addr)
	}
}

func (m *Monitor) listening() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.closed && m.listener != nil
}
