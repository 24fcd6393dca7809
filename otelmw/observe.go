package otelmw

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/meshless/meshless/resilience"
)

// Observe mode (resilience.Observe): a policy decides as usual and acts on
// nothing. Its would-be action arrives as its usual event, recorded with
// an observed context; the recorders count it in meshless.observe.decisions
// instead of the policy's own "rejected" or "timed_out" series, so that
// those keep counting only what was done.

const (
	metricObserveDecisions = "meshless.observe.decisions"
	attrPolicyKind         = attribute.Key("meshless.policy.kind")
	attrObserveAction      = attribute.Key("meshless.observe.action")
	eventObserved          = "meshless.observed"
)

// The values of meshless.observe.action.
const (
	actionReject  = "reject"
	actionTimeOut = "time_out"
	actionRetry   = "retry"
	actionHedge   = "hedge"
)

// observedOpts is the option slice of one policy instance's would-be
// action: the instance's own attributes, its kind and the action.
func observedOpts(base []attribute.KeyValue, kind resilience.Kind, action string) []metric.AddOption {
	return addOpts(base, attrPolicyKind.String(kind.String()), attrObserveAction.String(action))
}

// observed counts a would-be action and adds a "meshless.observed" span
// event that names it.
func (o *Observer) observed(ctx context.Context, opts []metric.AddOption, kind resilience.Kind, action string, err error) {
	o.observeDecisions.Add(ctx, 1, opts...)
	if !o.cfg.spanEvents {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrPolicyKind.String(kind.String()), attrObserveAction.String(action)}
	if r, ok := resilience.AsRejection(err); ok && r.RejectedBy().Reason() != "" {
		attrs = append(attrs, attrRejectionReason.String(r.RejectedBy().ErrorType()))
	}
	span.AddEvent(eventObserved, trace.WithAttributes(attrs...))
}

const (
	metricThrottlerCalls = "meshless.throttler.calls"
	attrThrottlerName    = attribute.Key("meshless.throttler.name")
	attrThrottlerOut     = attribute.Key("meshless.throttler.outcome")
)

// throttlerRecorder records an adaptive throttler's admitted and rejected
// requests (meshless.throttler.calls).
type throttlerRecorder struct {
	o                            *Observer
	admitted, rejected, observed []metric.AddOption
}

func newThrottlerRecorder(o *Observer, name string) *throttlerRecorder {
	base := []attribute.KeyValue{attrThrottlerName.String(name)}
	return &throttlerRecorder{
		o:        o,
		admitted: addOpts(base, attrThrottlerOut.String("admitted")),
		rejected: addOpts(base, attrThrottlerOut.String("rejected")),
		observed: observedOpts(base, resilience.KindThrottler, actionReject),
	}
}

func (r *throttlerRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventAcquired:
		r.o.throttlerCalls.Add(ctx, 1, r.admitted...)
	case resilience.EventRejection:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindThrottler, actionReject, e.Err)
			return
		}
		r.o.throttlerCalls.Add(ctx, 1, r.rejected...)
	}
}

func (r *throttlerRecorder) zero() {
	ctx := context.Background()
	r.o.throttlerCalls.Add(ctx, 0, r.admitted...)
	r.o.throttlerCalls.Add(ctx, 0, r.rejected...)
}
