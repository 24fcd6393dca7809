package otelmw

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/meshless/meshless/resilience"
)

const (
	attrRateLimiterName = attribute.Key("meshless.rate_limiter.name")
	attrRateLimiterOut  = attribute.Key("meshless.rate_limiter.outcome")
)

// rateLimiterRecorder records a rate limiter's permitted and rejected
// calls (meshless.rate_limiter.calls).
type rateLimiterRecorder struct {
	o                   *Observer
	name                string
	permitted, rejected []metric.AddOption
	observed            []metric.AddOption // a rejection in observe mode
}

func newRateLimiterRecorder(o *Observer, name string) *rateLimiterRecorder {
	base := []attribute.KeyValue{attrRateLimiterName.String(name)}
	return &rateLimiterRecorder{
		o: o, name: name,
		permitted: addOpts(base, attrRateLimiterOut.String("permitted")),
		rejected:  addOpts(base, attrRateLimiterOut.String("rejected")),
		observed:  observedOpts(base, resilience.KindRateLimiter, actionReject),
	}
}

func (r *rateLimiterRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventAcquired:
		r.o.rateLimiterCalls.Add(ctx, 1, r.permitted...)
	case resilience.EventRejection:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindRateLimiter, actionReject, e.Err)
			return
		}
		r.o.rateLimiterCalls.Add(ctx, 1, r.rejected...)
		if r.o.cfg.spanEvents {
			rateLimiterRejectionEvent(ctx, r.name, e)
		}
	}
}

func (r *rateLimiterRecorder) zero() {
	ctx := context.Background()
	r.o.rateLimiterCalls.Add(ctx, 0, r.permitted...)
	r.o.rateLimiterCalls.Add(ctx, 0, r.rejected...)
}

// rateLimiterRejectionEvent adds "meshless.rejection" for a call a rate
// limiter refused: reason "rate_limited", or "context_done" when the
// caller's context ended while it waited for a permit.
func rateLimiterRejectionEvent(ctx context.Context, name string, e resilience.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	reason := resilience.KindRateLimiter.ErrorType()
	if ctxDone(e.Err) {
		reason = "context_done"
	}
	span.AddEvent(eventRejection, trace.WithAttributes(
		attrRejectionPolicy.String(resilience.KindRateLimiter.String()),
		attrRejectionReason.String(reason),
		attrRateLimiterName.String(name),
	))
}

// ctxDone reports whether err says the caller's context ended.
func ctxDone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
