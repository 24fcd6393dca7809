package cluster_test

import (
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// An open that ends past the readers' longest wait (a pod with a longer
// one, a rolling deploy that changes the waits; a writer whose clock runs
// minutes ahead) is cut by each reader at its own now plus its longest
// wait. Pods of one configuration that hear it a millisecond apart still
// probe in one round: permittedNumberOfCallsInHalfOpenState probes in all,
// and a close by one closes the others.
func TestPodsThatCutOneFarOpenProbeInOneRound(t *testing.T) {
	w := newWorld(t)
	short := []circuitbreaker.Option{circuitbreaker.WithConfig(podConf(func(c *circuitbreaker.Config) {
		c.WaitDurationInOpenState = 5 * time.Second
		c.MaxWaitDurationInOpenState = 10 * time.Second
	})), circuitbreaker.WithName("svc")}
	a := w.pod("a", false) // waits 30 s
	b, c := w.podWith("b", false, short), w.podWith("c", false, short)
	for _, p := range []*pod{a, b, c} {
		p.sync()
	}
	sub := w.admin().Subscribe(t.Context(), "test:events")
	defer sub.Close()
	if _, err := sub.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.calls(6, fail)
	a.sync() // claims and publishes an open of 30 s
	msg := receive(t, sub)
	cluster.Deliver(b.c, msg) // b opens 10 s, its longest wait
	w.clk.Advance(time.Millisecond)
	cluster.Deliver(c.c, msg) // c too, a millisecond later
	b.wantState(circuitbreaker.StateOpen)
	c.wantState(circuitbreaker.StateOpen)
	w.clk.Advance(10 * time.Second)
	b.wantState(circuitbreaker.StateHalfOpen)
	c.wantState(circuitbreaker.StateHalfOpen)
	b.sync()
	c.sync()
	held := probes(5, b, c)
	if n := count(held); n != 2 {
		t.Fatalf("%d probes ran across b and c, want permittedNumberOfCallsInHalfOpenState = 2", n)
	}
	for p, pms := range held {
		for _, pm := range pms {
			pm.Record(ok)
		}
		p.wantState(circuitbreaker.StateClosed)
		p.sync() // publishes the close
		other := b
		if p == b {
			other = c
		}
		cluster.Deliver(other.c, receive(t, sub))
		other.wantState(circuitbreaker.StateClosed)
	}
}
