package outlier

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/pickfirst"
	_ "google.golang.org/grpc/health" // client-side health checking, turned on by healthCheckConfig
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/resilience"
)

var errEjected = errors.New(Name + ": endpoint ejected as an outlier")

// Name is the name the balancer is registered under, for
// loadBalancingConfig in a service config.
const Name = "meshless_outlier"

func init() { balancer.Register(builder{}) }

type builder struct{}

func (builder) Name() string { return Name }

// ParseConfig reads the balancer's JSON form (see [ServiceConfigJSON]).
func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg, err := parseConfig(js)
	if err != nil {
		return nil, err
	}
	lc := &lbConfig{cfg: cfg.withDefaults()}
	if cfg.Monitor != "" {
		m, ok := lookupMonitor(cfg.Monitor)
		if !ok {
			return nil, fmt.Errorf("%s: outlierDetection.monitor: no open Monitor named %q", Name, cfg.Monitor)
		}
		lc.monitor = m
	}
	if _, err := childConfig(balancer.Get(lc.cfg.ChildPolicy)); err != nil {
		return nil, fmt.Errorf("%s: outlierDetection.childPolicy: %w", Name, err)
	}
	return lc, nil
}

// childConfig parses the child policy's default config, "{}".
func childConfig(bld balancer.Builder) (serviceconfig.LoadBalancingConfig, error) {
	if p, ok := bld.(balancer.ConfigParser); ok {
		return p.ParseConfig(json.RawMessage("{}"))
	}
	return nil, nil
}

func (builder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	b := &outlierBalancer{
		cc:        cc,
		opts:      opts,
		endpoints: map[string]*endpoint{},
		clock:     resilience.SystemClock(),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		telling:   make(chan struct{}, 1),
	}
	b.settings.Store(newSettings(newClassifier(DefaultFailureStatusCodes()), b.clock, 0, 0))
	go b.run()
	return b
}

// settings is what the call path reads, replaced as a whole on a config
// change.
type settings struct {
	cls         classifier
	clock       resilience.Clock
	consecutive int64         // 0: detector off
	slow        time.Duration // 0: detector off, calls are not timed
	tick        time.Duration // timed calls picked within a tick share a span
	system      bool          // clock is the system clock: time the calls with time.Since
	base        time.Time     // the origin of the settings' time line
}

// outlierBalancer wraps a child policy. Lock order: childMu, then mu. Every
// call into the child, and every field of a subConn, is under childMu.
type outlierBalancer struct {
	cc   balancer.ClientConn
	opts balancer.BuildOptions

	childMu   sync.Mutex
	child     balancer.Balancer
	childName string
	closed    bool
	timer     resilience.Timer
	timerGen  uint64
	interval  time.Duration
	swept     time.Time // when the interval in progress began (the last sweep), on b.clock
	closeOnce sync.Once

	mu        sync.Mutex
	cfg       Config // defaults resolved
	monitor   *Monitor
	clock     resilience.Clock
	endpoints map[string]*endpoint // by address, only the resolver's addresses
	hosts     int                  // the endpoints the cap counts (see hostsOf)

	// pending is what the monitor has yet to be told, in the order the
	// changes were made (under mu); tell tells it holding telling's token,
	// so that a return never overtakes the ejection it ends. A channel: a
	// goroutine waiting its turn is durably blocked in a synctest bubble.
	pending []note
	telling chan struct{}

	settings atomic.Pointer[settings]
	kick     chan struct{} // a consecutive-failure threshold was reached
	done     chan struct{} // closed by Close
	exited   chan struct{} // closed when run returns
}

// endpoint is one resolver address's counters and ejection state.
type endpoint struct {
	addr   string
	b      *outlierBalancer
	doneFn func(balancer.DoneInfo) // e.done, made once
	noted  picknote.Endpoint       // e itself, for a note (picknote.Note.PickedBy)

	success, failure, slow atomic.Int64 // this interval
	consecutive            atomic.Int64
	wokeBy                 atomic.Pointer[settings] // the settings under which its run last woke the balancer
	ejected                atomic.Bool              // written under b.mu
	cur                    atomic.Pointer[span]     // the timed calls picked in the latest tick

	// under b.mu
	multiplier int
	at         time.Time // when it was last ejected
	reason     string    // why it was last ejected
	subConns   map[*subConn]struct{}
}

func (b *outlierBalancer) newEndpoint(addr string) *endpoint {
	e := &endpoint{addr: addr, b: b, subConns: map[*subConn]struct{}{}}
	e.doneFn, e.noted = e.done, e
	return e
}

// addrsOf returns the distinct addresses of a resolver state.
func addrsOf(s resolver.State) []string {
	var out []string
	for _, ep := range s.Endpoints {
		for _, a := range ep.Addresses {
			out = append(out, a.Addr)
		}
	}
	for _, a := range s.Addresses {
		out = append(out, a.Addr)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// hostsOf returns how many endpoints of a resolver state the cap counts:
// its endpoints, not their addresses (an endpoint is out when the address
// it uses is ejected), and never more than its distinct addresses.
func hostsOf(s resolver.State, addrs []string) int {
	n := 0
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) > 0 {
			n++
		}
	}
	if n == 0 {
		return len(addrs)
	}
	return min(n, len(addrs))
}

func (b *outlierBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	lc, ok := s.BalancerConfig.(*lbConfig)
	if !ok {
		return fmt.Errorf("%s: unexpected balancer config %T", Name, s.BalancerConfig)
	}
	b.childMu.Lock()
	err := b.update(lc, s.ResolverState)
	b.childMu.Unlock()
	b.tell()
	return err
}

// update applies a new config and resolver state. Called with b.childMu
// held; what it queues for the monitor is told once that is released.
func (b *outlierBalancer) update(lc *lbConfig, rs resolver.State) error {
	if b.closed {
		return nil
	}
	cfg := lc.cfg
	var notes []note
	b.mu.Lock()
	b.cfg = cfg
	moved := lc.monitor != nil && lc.monitor != b.monitor
	if moved {
		// The ejections move to the new Monitor: the old one hears them
		// return (it would keep them for ever), the new one hears them. So
		// do the times kept (the ejections' starts, the last sweep), onto
		// its clock, the time since them kept; the timer, below, too.
		oldNow, newNow := b.clock.Now(), lc.monitor.clock.Now()
		for _, e := range b.sortedEndpoints() {
			if e.ejected.Load() {
				if b.monitor != nil {
					notes = append(notes, note{addr: e.addr, m: b.monitor})
				}
				notes = append(notes, note{addr: e.addr, reason: e.reason, m: lc.monitor})
				e.at = newNow.Add(e.at.Sub(oldNow))
			}
		}
		b.swept = newNow.Add(b.swept.Sub(oldNow))
		b.monitor, b.clock = lc.monitor, lc.monitor.clock
	}
	var consecutive int64
	var slow time.Duration
	if !cfg.ConsecutiveFailures.Disabled {
		consecutive = int64(cfg.ConsecutiveFailures.Threshold)
	}
	if !cfg.SlowCalls.Disabled {
		slow = cfg.SlowCalls.DurationThreshold
	}
	b.settings.Store(newSettings(newClassifier(cfg.FailureStatusCodes), b.clock, consecutive, slow))
	addrs := addrsOf(rs)
	b.hosts = hostsOf(rs, addrs)
	for a, e := range b.endpoints {
		if _, found := slices.BinarySearch(addrs, a); !found {
			delete(b.endpoints, a)
			if e.ejected.Load() {
				notes = append(notes, note{addr: a})
			}
		}
	}
	for _, a := range addrs {
		if b.endpoints[a] == nil {
			b.endpoints[a] = b.newEndpoint(a)
		}
	}
	// A config with every detector off returns every endpoint at once and
	// forgets the multipliers, as gRFC A50 does for a config without
	// detectors: nothing would judge them again, and the operator who
	// switched detection off wants every endpoint serving now.
	var returned []*subConn
	noop := cfg.ConsecutiveFailures.Disabled && cfg.FailurePercentage.Disabled &&
		cfg.SuccessRate.Disabled && cfg.SlowCalls.Disabled
	// Fewer endpoints, or a lower cap, may leave too many ejected: the
	// ones due back soonest return now, so that the cap holds and one
	// endpoint always serves.
	var ejected []*endpoint
	for _, e := range b.sortedEndpoints() {
		switch {
		case noop && e.ejected.Load():
			returned = append(returned, b.unject(e)...)
			notes = append(notes, note{addr: e.addr})
			e.multiplier = 0
		case noop:
			e.multiplier = 0
		case e.ejected.Load():
			ejected = append(ejected, e)
		}
	}
	slices.SortStableFunc(ejected, func(x, y *endpoint) int { return b.until(x).Compare(b.until(y)) })
	for over := len(ejected) - maxEjected(b.hosts, cfg.MaxEjectionPercent); over > 0; over-- {
		e := ejected[0]
		ejected = ejected[1:]
		returned = append(returned, b.unject(e)...)
		notes = append(notes, note{addr: e.addr})
	}
	b.queue(notes)
	clock := b.clock
	b.mu.Unlock()
	for _, sc := range returned {
		sc.setEjected(false)
	}

	if b.timer == nil || b.interval != cfg.Interval || moved {
		// A new interval applies from the last sweep, as in gRFC A50: the
		// interval in progress keeps its counts and ends the new interval
		// after it began (now, if that is past), so that reloads never put
		// the sweeps off. A new Monitor's clock times it from then on.
		if b.timer != nil {
			b.timer.Stop()
		}
		b.interval = cfg.Interval
		next := b.interval
		if b.timer != nil {
			next = max(b.interval-clock.Now().Sub(b.swept), 0)
		} else {
			b.swept = clock.Now()
		}
		b.startTimer(clock, next)
	}

	if b.child == nil || b.childName != cfg.ChildPolicy {
		if b.child != nil {
			b.child.Close()
		}
		b.child = balancer.Get(cfg.ChildPolicy).Build(&ccWrapper{ClientConn: b.cc, b: b}, b.opts)
		b.childName = cfg.ChildPolicy
	}
	childCfg, err := childConfig(balancer.Get(cfg.ChildPolicy))
	if err != nil {
		return err
	}
	return b.child.UpdateClientConnState(balancer.ClientConnState{
		// Petiole policies (round_robin) set this for their pick_first
		// leaves; set here too for any child that builds on pick_first, so
		// that it registers the health listener through which ejection acts.
		ResolverState:  pickfirst.EnableHealthListener(rs),
		BalancerConfig: childCfg,
	})
}

func (b *outlierBalancer) ResolverError(err error) {
	b.childMu.Lock()
	defer b.childMu.Unlock()
	if b.child != nil && !b.closed {
		b.child.ResolverError(err)
	}
}

// UpdateSubConnState is never called: every SubConn has a StateListener.
func (b *outlierBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *outlierBalancer) ExitIdle() {
	b.childMu.Lock()
	defer b.childMu.Unlock()
	if b.child != nil && !b.closed {
		b.child.ExitIdle()
	}
}

func (b *outlierBalancer) Close() {
	b.closeOnce.Do(func() { close(b.done) })
	<-b.exited
	b.childMu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.child != nil {
		b.child.Close()
		b.child = nil
	}
	b.mu.Lock()
	var notes []note
	for a, e := range b.endpoints {
		if e.ejected.Load() {
			notes = append(notes, note{addr: a})
		}
	}
	b.queue(notes)
	b.endpoints = nil
	b.mu.Unlock()
	b.childMu.Unlock()
	b.tell()
}

// run ejects, off the call path, the endpoints that reached the
// consecutive-failure threshold.
func (b *outlierBalancer) run() {
	defer close(b.exited)
	for {
		select {
		case <-b.done:
			return
		case <-b.kick:
			b.ejectConsecutive()
		}
	}
}

// wake asks run to look for consecutive failures.
func (b *outlierBalancer) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// note is an ejection (reason set) or a return to tell the monitor of.
type note struct {
	addr, reason string
	m            *Monitor
}

// queue queues notes for their monitor (the balancer's unless set), if
// there is one. Called with b.mu held, where the changes they tell of were
// made.
func (b *outlierBalancer) queue(notes []note) {
	for _, n := range notes {
		if n.m == nil {
			n.m = b.monitor
		}
		if n.m != nil {
			b.pending = append(b.pending, n)
		}
	}
}

// tell tells the monitor what has been queued, in order: when it returns,
// the caller's changes have been told, by it or by another goroutine that
// was telling. Called with no lock held: the monitor calls its listener.
//
// A listener's panic goes on up from here, to whoever called (gRPC, the
// balancer's goroutine, the clock's timer): the note it was told is
// recorded by the monitor all the same, and the notes after it go back to
// the head of the queue, to be told, in order, by the next tell (the next
// sweep, at the latest).
func (b *outlierBalancer) tell() {
	b.telling <- struct{}{}
	defer func() { <-b.telling }()
	b.mu.Lock()
	notes := b.pending
	b.pending = nil
	b.mu.Unlock()
	told := 0
	defer func() {
		if told < len(notes) { // a listener panicked
			b.mu.Lock()
			b.pending = slices.Concat(notes[told:], b.pending)
			b.mu.Unlock()
		}
	}()
	for _, n := range notes {
		told++
		if n.reason != "" {
			n.m.eject(n.addr, n.reason)
		} else {
			n.m.unject(n.addr)
		}
	}
}

// sortedEndpoints returns the endpoints by address. Called with b.mu held.
func (b *outlierBalancer) sortedEndpoints() []*endpoint {
	eps := make([]*endpoint, 0, len(b.endpoints))
	for _, e := range b.endpoints {
		eps = append(eps, e)
	}
	slices.SortFunc(eps, func(x, y *endpoint) int { return strings.Compare(x.addr, y.addr) })
	return eps
}

// eject marks e ejected and returns its SubConns. Called with b.mu held.
func (b *outlierBalancer) eject(e *endpoint, now time.Time, reason string) []*subConn {
	e.ejected.Store(true)
	e.reason = reason
	e.multiplier++
	e.at = now
	e.consecutive.Store(0)
	return slices.Collect(mapKeys(e.subConns))
}

// until is when e's ejection ends, by the current config's ejection times
// (a new config shortens or lengthens the ejections in progress, as in
// gRFC A50). Called with b.mu held.
func (b *outlierBalancer) until(e *endpoint) time.Time {
	return e.at.Add(ejectionTime(b.cfg.BaseEjectionTime, b.cfg.MaxEjectionTime, e.multiplier))
}

// unject marks e back in service and returns its SubConns. Called with b.mu
// held.
func (b *outlierBalancer) unject(e *endpoint) []*subConn {
	e.ejected.Store(false)
	e.consecutive.Store(0)
	return slices.Collect(mapKeys(e.subConns))
}

func mapKeys(m map[*subConn]struct{}) func(func(*subConn) bool) {
	return func(yield func(*subConn) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ejectConsecutive ejects the endpoints whose consecutive failures reached
// the threshold, within the cap.
func (b *outlierBalancer) ejectConsecutive() {
	b.childMu.Lock()
	if b.closed {
		b.childMu.Unlock()
		return
	}
	b.mu.Lock()
	threshold := b.settings.Load().consecutive
	eps := b.sortedEndpoints()
	n := 0
	for _, e := range eps {
		if e.ejected.Load() {
			n++
		}
	}
	limit := maxEjected(b.hosts, b.cfg.MaxEjectionPercent)
	var notes []note
	var out []*subConn
	now := b.clock.Now()
	for _, e := range eps {
		if threshold > 0 && n < limit && !e.ejected.Load() && e.consecutive.Load() >= threshold {
			out = append(out, b.eject(e, now, ReasonConsecutiveFailures)...)
			notes = append(notes, note{addr: e.addr, reason: ReasonConsecutiveFailures})
			n++
		}
	}
	b.queue(notes)
	b.mu.Unlock()
	for _, sc := range out {
		sc.setEjected(true)
	}
	b.childMu.Unlock()
	b.tell()
}

// tick runs every interval: the rate detectors, then returns and the decay
// of ejection multipliers.
func (b *outlierBalancer) tick(gen uint64) {
	b.childMu.Lock()
	if b.closed || gen != b.timerGen {
		b.childMu.Unlock()
		return
	}
	b.mu.Lock()
	clock := b.clock
	now := clock.Now()
	eps := b.sortedEndpoints()
	samples := make([]sample, len(eps))
	for i, e := range eps {
		samples[i] = sample{
			success: e.success.Swap(0), failure: e.failure.Swap(0), slow: e.slow.Swap(0),
			ejected: e.ejected.Load(),
		}
	}
	var notes []note
	var ejectSCs, returnSCs []*subConn
	justEjected := make([]bool, len(eps))
	for _, v := range detect(&b.cfg, samples, b.hosts) {
		e := eps[v.i]
		ejectSCs = append(ejectSCs, b.eject(e, now, v.reason)...)
		notes = append(notes, note{addr: e.addr, reason: v.reason})
		justEjected[v.i] = true
	}
	for i, e := range eps {
		switch {
		case justEjected[i]:
		case !e.ejected.Load():
			if e.multiplier > 0 {
				e.multiplier--
			}
		case !now.Before(b.until(e)):
			returnSCs = append(returnSCs, b.unject(e)...)
			notes = append(notes, note{addr: e.addr})
		}
	}
	b.queue(notes)
	b.mu.Unlock()
	for _, sc := range ejectSCs {
		sc.setEjected(true)
	}
	for _, sc := range returnSCs {
		sc.setEjected(false)
	}
	b.swept = now
	b.startTimer(clock, b.interval)
	b.childMu.Unlock()
	b.tell()
}

// startTimer arms the interval timer to tick after d. A tick armed before
// the latest call does nothing, so that a config change never leaves two
// timers running. Called with b.childMu held.
func (b *outlierBalancer) startTimer(clock resilience.Clock, d time.Duration) {
	b.timerGen++
	gen := b.timerGen
	b.timer = clock.AfterFunc(d, func() { b.tick(gen) })
}
