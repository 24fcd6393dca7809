package resilience_test

import (
	"context"
	"testing"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestObserversFanOut(t *testing.T) {
	var a, b resiliencetest.Observer
	none := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder { return nil })
	obs := resilience.Observers(&a, none, nil, &b)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "m"})
	rec.Record(context.Background(), resilience.Event{Type: resilience.EventCall})
	for _, o := range []*resiliencetest.Observer{&a, &b} {
		if s := o.Sources(); len(s) != 1 || s[0].Name != "m" {
			t.Fatalf("sources = %v, want the one attached", s)
		}
		if e := o.Events(resilience.EventCall); len(e) != 1 {
			t.Fatalf("events = %v, want one call", e)
		}
	}
	if r := resilience.Observers(none).Attach(resilience.Source{}); r != nil {
		t.Fatalf("Observers of observers that want nothing returned %v, want nil", r)
	}
	if r := resilience.Attach(nil, resilience.Source{}); r != nil {
		t.Fatal("Attach(nil, ...) returned a recorder")
	}
}
