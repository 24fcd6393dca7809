package cluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/internal/redistest"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A Redis restored from a snapshot older than the pods' state (a backup, a
// replica promoted from behind) hands back an open record the pods have
// served and closed, the lease count of that round without its closed
// mark, and windows written before the close. No pod re-opens on them, a
// pod that joins after the restore does not either, every sync succeeds,
// and sharing goes on: the next open reaches the peer with the same end.
func TestARedisRestoredFromAnOlderSnapshotReopensNothing(t *testing.T) {
	w := &world{t: t, srv: redistest.Start(t, redistest.Snapshots()), clk: resiliencetest.NewClock(t0)}
	admin := w.admin()
	a, b := w.pod("a", false), w.pod("b", false)
	a.sync()
	b.sync()
	b.calls(5, fail) // b's window, 5 failures: under minimumNumberOfCalls alone
	b.sync()
	a.calls(6, fail)
	a.sync() // claims the open
	b.sync() // adopts it from the record
	b.wantState(circuitbreaker.StateOpen)
	w.clk.Advance(openWait)
	a.sync() // leases the round's probes
	if err := admin.Save(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(w.srv.Dir(), "dump.rdb")
	old, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	if n := a.calls(2, ok); n != 2 {
		t.Fatalf("a ran %d probes, want 2", n)
	}
	a.sync() // closes the round and publishes it
	b.sync() // learns the close when it tries to lease
	b.wantState(circuitbreaker.StateClosed)

	w.srv.Kill()
	if err := os.WriteFile(dump, old, 0o600); err != nil {
		t.Fatal(err)
	}
	w.srv.Restart()
	for _, key := range []string{"test:open:svc", "test:w:svc", "test:probes:svc:" + ms(t0.Add(openWait))} {
		if admin.Exists(t.Context(), key).Val() != 1 {
			t.Fatalf("the restored snapshot has no %s", key)
		}
	}
	for _, p := range []*pod{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for p.c.Sync(t.Context()) != nil { // go-redis reconnects on the next command
			if time.Now().After(deadline) {
				t.Fatal("Sync still failing 10s after Redis came back")
			}
		}
	}
	c := w.pod("c", false) // joins after the restore
	for range 3 {
		for _, p := range []*pod{a, b, c} {
			p.sync()
			p.wantState(circuitbreaker.StateClosed)
		}
		w.clk.Advance(interval)
	}
	if n := b.calls(1, ok) + c.calls(1, ok); n != 2 {
		t.Fatalf("%d of 2 calls ran", n)
	}
	// Sharing goes on: a's next open reaches b and c with its end.
	a.calls(6, fail)
	a.sync()
	for _, p := range []*pod{b, c} {
		p.sync()
		p.wantState(circuitbreaker.StateOpen)
		if got, want := coord.Of(p.b).Window().Until, coord.Of(a.b).Window().Until; !got.Equal(want) {
			t.Fatalf("%s opens until %v, a until %v", p.c.InstanceID(), got, want)
		}
	}
}
