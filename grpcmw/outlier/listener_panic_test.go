package outlier_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// panickyListener panics in its first Ejected (after hold is closed, if
// set) and records every other call.
type panickyListener struct {
	mu       sync.Mutex
	ev       []string
	panicked bool
	hold     chan struct{} // if set, closed to let the first Ejected panic
	holding  chan struct{} // closed when the first Ejected waits for hold
}

func (l *panickyListener) Ejected(addr, reason string) {
	l.mu.Lock()
	first := !l.panicked
	l.panicked = true
	l.mu.Unlock()
	if first {
		if l.hold != nil {
			close(l.holding)
			<-l.hold
		}
		panic("listener")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, "ejected "+addr)
}

func (l *panickyListener) Returned(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, "returned "+addr)
}

func (l *panickyListener) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ev)
}

// panicTickNet is three pods behind a balancer on a fake clock, with a
// Monitor whose listener is l: a sweep runs, in the caller's goroutine,
// only when the test advances the clock.
func panicTickNet(t *testing.T, scheme string, l outlier.Listener) (*churnNet, *outlier.Monitor, *resiliencetest.Clock) {
	t.Helper()
	clk := resiliencetest.NewClock(t0)
	mon, err := outlier.NewMonitor(outlier.WithClock(clk), outlier.WithListener(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	cfg := only(func(c *outlier.Config) {
		c.FailurePercentage = outlier.FailurePercentage{Threshold: 50, MinimumHosts: 1, RequestVolume: 1}
		c.MaxEjectionPercent = 100
	})
	cfg.Monitor = mon.Name()
	n := newChurnNet(t, scheme, 3, cfg)
	t.Cleanup(n.close)
	synctest.Wait() // every pod READY
	return n, mon, clk
}

// advance advances clk by d and returns the panic it passed on, if any.
func advance(clk *resiliencetest.Clock, d time.Duration) (p any) {
	defer func() { p = recover() }()
	clk.Advance(d)
	return nil
}

// A listener that panics while told of one of a sweep's ejections: the
// panic goes on up (here, to the caller of the fake clock's Advance, in
// whose goroutine the sweep runs), the Monitor records the ejection it was
// told of, and the sweep's other ejection is told at the next sweep. Before,
// the Monitor recorded neither and never heard of the second: Ejected()
// said nothing was ejected while the balancer kept both pods out, and
// the listener later heard them return without having heard them ejected.
func TestAListenerThatPanicsLosesNoNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := new(panickyListener)
		n, mon, clk := panicTickNet(t, "panicky", l)
		for i := range 2 {
			n.pods[n.addr(i)].code.Store(int32(codes.Unavailable))
		}
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 9 { // round_robin: three calls to each pod
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		if p := advance(clk, time.Second); p != "listener" {
			t.Fatalf("the sweep passed on %v, want the listener's panic", p)
		}
		if got, want := mon.Ejected(), []string{n.addr(0)}; !slices.Equal(got, want) {
			t.Fatalf("after the listener panicked, the Monitor has %v ejected, want %v (the ejection it was told of)", got, want)
		}
		if p := advance(clk, time.Second); p != nil {
			t.Fatalf("the next sweep panicked: %v", p)
		}
		if got, want := mon.Ejected(), []string{n.addr(0), n.addr(1)}; !slices.Equal(got, want) {
			t.Fatalf("at the next sweep, the Monitor has %v ejected, want %v", got, want)
		}
		for i := range 2 {
			n.pods[n.addr(i)].code.Store(int32(codes.OK))
		}
		if p := advance(clk, 10*time.Second); p != nil { // the ejections (10 s) end
			t.Fatalf("a later sweep panicked: %v", p)
		}
		if got := mon.Ejected(); len(got) != 0 {
			t.Errorf("after the ejections ended, the Monitor has %v ejected", got)
		}
		want := []string{"ejected " + n.addr(1), "returned " + n.addr(0), "returned " + n.addr(1)}
		if got := l.events(); !slices.Equal(got, want) {
			t.Errorf("the listener heard %v, want %v", got, want)
		}
	})
}

// The notes a listener's panic left untold are told before the changes
// queued while it ran: pod 1, whose ejection is still untold, leaves the
// resolver while the listener is being told of pod 0 (and is about to
// panic); pod 1 is heard ejected, then returned, and the Monitor keeps
// nothing of it. Told in the other order, the Monitor (and a metrics
// listener) would keep the removed pod ejected for ever.
func TestNotesLeftByAPanicAreToldFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &panickyListener{hold: make(chan struct{}), holding: make(chan struct{})}
		n, mon, clk := panicTickNet(t, "panickyremoved", l)
		for i := range 2 {
			n.pods[n.addr(i)].code.Store(int32(codes.Unavailable))
		}
		client := testgrpc.NewTestServiceClient(n.cc)
		for range 9 {
			_, _ = client.EmptyCall(t.Context(), &testgrpc.Empty{})
		}
		swept := make(chan any)
		go func() { swept <- advance(clk, time.Second) }()
		<-l.holding                          // the sweep's first ejection is being told
		go n.r.UpdateState(n.state(3, 0, 2)) // pod 1 leaves
		synctest.Wait()
		close(l.hold)
		if p := <-swept; p != "listener" {
			t.Fatalf("the sweep passed on %v, want the listener's panic", p)
		}
		synctest.Wait()
		if got, want := mon.Ejected(), []string{n.addr(0)}; !slices.Equal(got, want) {
			t.Errorf("after pod 1 left, the Monitor has %v ejected, want %v", got, want)
		}
		want := []string{"ejected " + n.addr(1), "returned " + n.addr(1)}
		if got := l.events(); !slices.Equal(got, want) {
			t.Errorf("the listener heard %v, want %v", got, want)
		}
	})
}
