package otelmw_test

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/otelmw"
)

var _ cluster.Listener = (*otelmw.ClusterListener)(nil)

func TestClusterListener(t *testing.T) {
	mp, r := newProvider(t)
	l, err := otelmw.NewClusterListener(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	outcome := func(o string) attribute.KeyValue { return attribute.String("meshless.cluster.outcome", o) }
	name := func(n string) attribute.KeyValue { return attribute.String("meshless.circuit_breaker.name", n) }

	l.Synced(true)
	l.Synced(true)
	l.Synced(false)
	l.Connected(true)
	l.RemoteOpen("payment.PaymentService")
	ms := collect(t, r)
	sameValues(t, "meshless.cluster.syncs", values(t, ms["meshless.cluster.syncs"]), map[string]float64{
		enc(outcome("ok")): 2, enc(outcome("error")): 1,
	})
	sameValues(t, "meshless.cluster.connected", values(t, ms["meshless.cluster.connected"]), map[string]float64{enc(): 1})
	sameValues(t, "meshless.cluster.remote_opens", values(t, ms["meshless.cluster.remote_opens"]), map[string]float64{
		enc(name("payment.PaymentService")): 1,
	})
	for metricName, unit := range map[string]string{"meshless.cluster.syncs": "{sync}", "meshless.cluster.connected": "1", "meshless.cluster.remote_opens": "{transition}"} {
		if got := ms[metricName].Unit; got != unit {
			t.Errorf("%s unit %q, want %q", metricName, got, unit)
		}
	}
	l.Connected(false)
	l.Connected(false) // never below zero
	if got := values(t, collect(t, r)["meshless.cluster.connected"]); got[enc()] != 0 {
		t.Fatalf("connected after going down: %v", got)
	}
	// Names are bounded.
	for i := range 1100 {
		l.RemoteOpen("svc" + strconv.Itoa(i))
	}
	got := values(t, collect(t, r)["meshless.cluster.remote_opens"])
	if len(got) != 1001 || got[enc(name("_OTHER"))] != 101 {
		t.Fatalf("%d series, _OTHER = %v; want 1001 and 101", len(got), got[enc(name("_OTHER"))])
	}
}
