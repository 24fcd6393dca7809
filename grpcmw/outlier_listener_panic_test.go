package grpcmw_test

import (
	"testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// panickingListener panics in every method.
type panickingListener struct{}

func (panickingListener) Ejected(string, string) { panic("user listener") }
func (panickingListener) Returned(string)        { panic("user listener") }

// A WithOutlierListener listener that panics: the panic goes on up to the
// balancer, and the chain's observer (its meshless.outlier.* metrics) still
// hears the ejection and the return. Before, the observer heard neither:
// the gauge said the endpoint served while the balancer kept it out.
func TestAPanickingOutlierListenerStillLetsTheObserverHear(t *testing.T) {
	obs := new(resiliencetest.Observer)
	l := grpcmw.EjectionListener(panickingListener{}, obs.Attach(resilience.Source{Kind: resilience.KindOutlier}))
	passedOn := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	if p := passedOn(func() { l.Ejected("a:1", outlier.ReasonSlowCalls) }); p != "user listener" {
		t.Errorf("Ejected passed on %v, want the user listener's panic", p)
	}
	if p := passedOn(func() { l.Returned("a:1") }); p != "user listener" {
		t.Errorf("Returned passed on %v, want the user listener's panic", p)
	}
	ev := obs.Events(resilience.EventEjected, resilience.EventReturned)
	if len(ev) != 2 || ev[0].Type != resilience.EventEjected || ev[0].Endpoint != "a:1" ||
		ev[0].Reason == nil || ev[0].Reason.String() != outlier.ReasonSlowCalls ||
		ev[1].Type != resilience.EventReturned || ev[1].Endpoint != "a:1" {
		t.Fatalf("observer events %+v, want the ejection of a:1 (slow_calls) and its return", ev)
	}
}
