package otelmw

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/meshless/meshless/resilience"
)

const (
	eventHedge        = "meshless.hedge"
	attrHedgingWinner = attribute.Key("meshless.hedging.winner")
	attrHedgeAttempt  = attribute.Key("meshless.hedging.attempt")
	attrHedgeDelay    = attribute.Key("meshless.hedging.delay")
)

// hedgingRecorder records a hedging policy's copies
// (meshless.hedging.attempts), once per call, when it is over.
type hedgingRecorder struct {
	o      *Observer
	method string
	// by winner: first, hedge, none
	first, hedge, none []metric.AddOption
	observed           []metric.AddOption // a copy in observe mode
}

func newHedgingRecorder(o *Observer, method string) *hedgingRecorder {
	base := o.methodAttrs(method)
	return &hedgingRecorder{
		o: o, method: method,
		first:    addOpts(base, attrHedgingWinner.String("first")),
		hedge:    addOpts(base, attrHedgingWinner.String("hedge")),
		none:     addOpts(base, attrHedgingWinner.String("none")),
		observed: observedOpts(base, resilience.KindHedging, actionHedge),
	}
}

func (r *hedgingRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventHedgeDone:
		opts := r.none
		switch {
		case e.Winner == 1:
			opts = r.first
		case e.Winner > 1:
			opts = r.hedge
		}
		r.o.hedgingAttempts.Add(ctx, int64(e.Attempt), opts...)
	case resilience.EventHedge:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindHedging, actionHedge, e.Err)
			return
		}
		if r.o.cfg.spanEvents {
			hedgeEvent(ctx, r.method, e)
		}
	}
}

func (r *hedgingRecorder) zero() {
	ctx := context.Background()
	r.o.hedgingAttempts.Add(ctx, 0, r.first...)
	r.o.hedgingAttempts.Add(ctx, 0, r.hedge...)
	r.o.hedgingAttempts.Add(ctx, 0, r.none...)
}

// hedgeEvent adds "meshless.hedge" for each copy a hedging policy sends
// after the first: its number, the time since the copy before it
// (seconds), the method, and the non-fatal error that sent it at once, if
// one did.
func hedgeEvent(ctx context.Context, method string, e resilience.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, attrHedgeAttempt.Int(e.Attempt), attrHedgeDelay.Float64(e.Backoff.Seconds()))
	if method != "" {
		attrs = append(attrs, attrMethod.String(method))
	}
	if e.Err != nil {
		attrs = appendError(ctx, attrs, e.Err)
	}
	span.AddEvent(eventHedge, trace.WithAttributes(attrs...))
}
