package otelmw_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

var _ outlier.Listener = (*otelmw.OutlierListener)(nil)

func TestOutlierListener(t *testing.T) {
	mp, r := newProvider(t)
	l, err := otelmw.NewOutlierListener(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	addr := func(a string) attribute.KeyValue { return attribute.String("server.address", a) }
	reason := func(r string) attribute.KeyValue { return attribute.String("meshless.outlier.reason", r) }
	const a, b = "10.0.0.1:50051", "10.0.0.2:50051"

	l.Ejected(a, outlier.ReasonConsecutiveFailures)
	l.Ejected(b, outlier.ReasonSlowCalls)
	l.Ejected(b, "something new")
	ms := collect(t, r)
	sameValues(t, "meshless.outlier.ejections", values(t, ms["meshless.outlier.ejections"]), map[string]float64{
		enc(addr(a), reason("consecutive_failures")): 1,
		enc(addr(b), reason("slow_calls")):           1,
		enc(addr(b), reason("_OTHER")):               1,
	})
	sameValues(t, "meshless.outlier.ejected", values(t, ms["meshless.outlier.ejected"]), map[string]float64{
		enc(addr(a)): 1,
		enc(addr(b)): 2, // two balancers (or two ejections) without a return
	})
	if m := ms["meshless.outlier.ejections"]; m.Unit != "{ejection}" {
		t.Errorf("ejections unit %q", m.Unit)
	}
	if m := ms["meshless.outlier.ejected"]; m.Unit != "{endpoint}" {
		t.Errorf("ejected unit %q", m.Unit)
	}

	l.Returned(a)
	l.Returned(b)
	got := values(t, collect(t, r)["meshless.outlier.ejected"])
	if got[enc(addr(a))] != 0 || got[enc(addr(b))] != 1 {
		t.Fatalf("after returns: %v, want a at 0 and b at 1", got)
	}
	got = values(t, collect(t, r)["meshless.outlier.ejected"])
	if _, ok := got[enc(addr(a))]; ok || got[enc(addr(b))] != 1 {
		t.Fatalf("a returned endpoint's series is reported once at 0, then dropped: %v", got)
	}
	l.Ejected(a, outlier.ReasonSuccessRate)
	ms = collect(t, r)
	if got := values(t, ms["meshless.outlier.ejected"]); got[enc(addr(a))] != 1 {
		t.Fatalf("ejected again: %v", got)
	}
	if got := values(t, ms["meshless.outlier.ejections"]); got[enc(addr(a), reason("success_rate"))] != 1 ||
		got[enc(addr(a), reason("consecutive_failures"))] != 1 {
		t.Fatalf("ejections: %v", got)
	}
}

// The outlier metrics through a real balancer's Monitor.
func ExampleNewOutlierListener() {
	l, err := otelmw.NewOutlierListener(nil) // otel.GetMeterProvider()
	if err != nil {
		panic(err)
	}
	defer l.Close()
	mon, err := outlier.NewMonitor(outlier.WithListener(l))
	if err != nil {
		panic(err)
	}
	defer mon.Close()
	_, err = outlier.ServiceConfigJSON(outlier.Config{Monitor: mon.Name()}, nil)
	// grpc.NewClient(target, grpc.WithDefaultServiceConfig(sc), ...)
	_ = err
	// Output:
}

// grpcmw sends its balancer's ejections to the chain's observer as events of
// a KindOutlier source; the Observer records them as the same metrics.
func TestObserverRecordsOutlierEvents(t *testing.T) {
	mp, r := newProvider(t)
	o, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	rec := o.Attach(resilience.Source{Kind: resilience.KindOutlier, Name: "outlier"})
	if rec == nil {
		t.Fatal("no recorder for KindOutlier")
	}
	const a = "10.0.0.1:50051"
	ctx := context.Background()
	rec.Record(ctx, resilience.Event{Type: resilience.EventEjected, Endpoint: a, Reason: label(outlier.ReasonSlowCalls)})
	rec.Record(ctx, resilience.Event{Type: resilience.EventEjected, Endpoint: a}) // no reason: _OTHER
	ms := collect(t, r)
	sameValues(t, "meshless.outlier.ejections", values(t, ms["meshless.outlier.ejections"]), map[string]float64{
		enc(attribute.String("server.address", a), attribute.String("meshless.outlier.reason", "slow_calls")): 1,
		enc(attribute.String("server.address", a), attribute.String("meshless.outlier.reason", "_OTHER")):     1,
	})
	rec.Record(ctx, resilience.Event{Type: resilience.EventReturned, Endpoint: a})
	rec.Record(ctx, resilience.Event{Type: resilience.EventReturned, Endpoint: a})
	if got := values(t, collect(t, r)["meshless.outlier.ejected"]); got[enc(attribute.String("server.address", a))] != 0 {
		t.Fatalf("after both returns: %v, want 0", got)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if rec := o.Attach(resilience.Source{Kind: resilience.KindOutlier}); rec != nil {
		// Attaching after Close is allowed; recording must not panic.
		rec.Record(ctx, resilience.Event{Type: resilience.EventEjected, Endpoint: a})
	}
}

type label string

func (l label) String() string { return string(l) }
