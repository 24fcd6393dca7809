package cluster_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
)

// A peer deletes a field it judged stale at one sync at its next, and only
// if the field still holds what it judged: an instance that was late, and
// wrote its field again in between, keeps it and is counted. Before, the
// peer deleted it all the same, and the instance, believing its field
// written, went uncounted for two more syncs.
func TestALateInstancesFieldIsNotDeletedOnceWrittenAgain(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	a := w.pod("a", false)
	b := w.pod("b", false, decideOn(cluster.DecideCluster))
	b.rdb.AddHook(new(noWindowWrites)) // so that only a writes the hash
	b.sync()
	a.calls(10, ok)
	a.sync()
	w.clk.Advance(3*interval + time.Millisecond) // a is late: its field is stale for b
	b.sync()
	a.sync()         // a writes it again
	b.calls(5, fail) // alone they open b; with a's 10 successes (5 of 16) they do not
	b.calls(1, ok)
	b.sync() // deletes nothing: a's field changed since b judged it
	if _, _, present := field(t, admin, "a"); !present {
		t.Fatal("a's field, written again after b judged it stale, was deleted")
	}
	b.wantState(circuitbreaker.StateClosed)
	// A dead instance's field is still deleted at the sync after it was
	// judged stale.
	w.clk.Advance(3*interval + time.Millisecond)
	b.sync()
	b.sync()
	if _, _, present := field(t, admin, "a"); present {
		t.Fatal("a's field, stale at two syncs of b and unchanged, was not deleted")
	}
}

// A window hash of more than MaxInstances fields is dropped and none of its
// fields counted, also when Redis returns it whole in one HSCAN reply (a
// hash kept as a listpack: hash-max-listpack-entries raised above 1,024),
// without a cursor to follow.
func TestAHashOfTooManyInstancesInOneReplyIsDropped(t *testing.T) {
	w := newWorld(t)
	admin := w.admin()
	if err := admin.ConfigSet(t.Context(), "hash-max-listpack-entries", "4096").Err(); err != nil {
		t.Fatal(err)
	}
	a := w.pod("a", false, decideOn(cluster.DecideCluster))
	a.sync()
	now := w.clk.Now()
	fields := make([]any, 0, 2*2000)
	for i := range 2000 {
		fields = append(fields, "peer"+strconv.Itoa(i), "10 0 0 "+ms(now)+" "+ms(now))
	}
	if err := admin.HSet(t.Context(), "test:w:svc", fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if enc := admin.ObjectEncoding(t.Context(), "test:w:svc").Val(); enc != "listpack" {
		t.Fatalf("the planted hash is a %s, want a listpack (one HSCAN reply)", enc)
	}
	a.calls(10, fail)
	a.sync()
	a.healthy()
	if got := a.b.State(); got != circuitbreaker.StateOpen {
		t.Fatalf("a is %v, want OPEN: 2,000 planted windows of successes were counted", got)
	}
	if n := admin.HLen(t.Context(), "test:w:svc").Val(); n > cluster.MaxInstances {
		t.Fatalf("the window hash still has %d fields", n)
	}
}
