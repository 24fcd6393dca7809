package cluster_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
)

// A breaker with no name (circuitbreaker's default, from Go) is shared
// under the empty name like any other: the messages its instance publishes
// are read by its peers. Before, an open of an unnamed breaker was
// published as "o … a " and every peer took the message for garbage: the
// open reached them only at their next sync, and a close by probes only
// when they next tried to lease.
func TestAnUnnamedBreakersMessagesAreRead(t *testing.T) {
	w := newWorld(t)
	unnamed := []circuitbreaker.Option{circuitbreaker.WithName("")}
	a, b := w.podWith("a", false, unnamed), w.podWith("b", false, unnamed)
	a.sync()
	b.sync()
	sub := w.admin().Subscribe(t.Context(), "test:events")
	defer sub.Close()
	if _, err := sub.Receive(t.Context()); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	a.calls(6, fail)
	a.sync() // claims and publishes the open
	msg := receive(t, sub)
	cluster.Deliver(b.c, msg)
	b.wantState(circuitbreaker.StateOpen)
	if got, want := coord.Of(b.b).Window().Until, coord.Of(a.b).Window().Until; !got.Equal(want) {
		t.Fatalf("b opens until %v, a until %v", got, want)
	}
	// a's probes close the key; b, half-open with no lease, hears it.
	w.clk.Advance(openWait)
	a.sync() // leases its probes
	if n := a.calls(2, ok); n != 2 {
		t.Fatalf("a ran %d probes, want 2", n)
	}
	a.wantState(circuitbreaker.StateClosed)
	a.sync() // publishes the close
	cluster.Deliver(b.c, receive(t, sub))
	b.wantState(circuitbreaker.StateClosed)
}

// receive returns the next message of sub, within 10 s.
func receive(t *testing.T, sub *redis.PubSub) string {
	t.Helper()
	m, err := sub.ReceiveTimeout(t.Context(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := m.(*redis.Message)
	if !ok {
		t.Fatalf("received %#v, want a message", m)
	}
	return msg.Payload
}
