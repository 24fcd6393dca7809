package resilience

import "context"

// observeKey marks a context as observed.
type observeKey struct{}

// Observe returns ctx marked as observed (observe mode, for a rollout): the
// policies that see it decide and report as usual and act on nothing. The
// transports' engine (grpcmw, httpmw in mode: observe) admits an attempt
// that a [Gate] refuses; a gate never waits for a permit and never shortens the deadline
// of an observed context; a retry or hedging policy reports the attempt it
// would make and makes none. What a policy would have done reaches its
// [Observer] as the usual event, recorded with the observed context, so that
// an observer tells it apart with [Observing].
func Observe(ctx context.Context) context.Context {
	if Observing(ctx) {
		return ctx
	}
	return context.WithValue(ctx, observeKey{}, true)
}

// Observing reports whether ctx is observed (see [Observe]). Policies and
// observers ask it only when they would act (wait, refuse, retry), never on
// the path of a call that goes through.
func Observing(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	v, _ := ctx.Value(observeKey{}).(bool)
	return v
}
