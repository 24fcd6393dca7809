package otelmw

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/meshless/meshless/circuitbreaker"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/meshless/meshless/resilience"
)

// Each recorder holds the option slices of its source's events, built by
// Attach; Record picks one and records. None allocates per event except
// the span events of the failure path.

const nStates = len(circuitbreaker.States)

// breakerRecorder records a circuit breaker's calls, rejections and
// transitions.
type breakerRecorder struct {
	o        *Observer
	g        *gauged // nil without a snapshot
	name     string
	base     []attribute.KeyValue     // the breaker's name
	calls    [3][2][]metric.AddOption // [outcome][slow]
	rejected []metric.AddOption
	observed []metric.AddOption // a rejection in observe mode
	// trans holds the option slice of each (from, to) pair, built on the
	// pair's first transition: most pairs never happen.
	trans [nStates][nStates]atomic.Pointer[[]metric.AddOption]
}

var outcomeValues = [...]string{resilience.Success: "success", resilience.Failure: "failure", resilience.Ignored: "ignored"}

func newBreakerRecorder(o *Observer, name string) *breakerRecorder {
	r := &breakerRecorder{o: o, name: name, base: []attribute.KeyValue{attrBreakerName.String(name)}}
	for oc, v := range outcomeValues {
		for slow := range 2 {
			r.calls[oc][slow] = addOpts(r.base, attrBreakerOutcome.String(v), attrSlow.Bool(slow == 1))
		}
	}
	r.rejected = addOpts(r.base, attrBreakerOutcome.String("rejected"), attrSlow.Bool(false))
	r.observed = observedOpts(r.base, resilience.KindCircuitBreaker, actionReject)
	return r
}

func (r *breakerRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventCall:
		if int(e.Outcome) < len(r.calls) {
			slow := 0
			if e.Slow {
				slow = 1
			}
			r.o.breakerCalls.Add(ctx, 1, r.calls[e.Outcome][slow]...)
		}
	case resilience.EventRejection:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindCircuitBreaker, actionReject, e.Err)
			return
		}
		r.o.breakerCalls.Add(ctx, 1, r.rejected...)
		if r.o.cfg.spanEvents {
			breakerRejectionEvent(ctx, r.name, e)
		}
	case resilience.EventTransition:
		r.o.breakerTransitions.Add(ctx, 1, r.transition(e.From, e.To)...)
	}
}

func (r *breakerRecorder) transition(fromL, toL resilience.Label) []metric.AddOption {
	from, ok1 := fromL.(circuitbreaker.State)
	to, ok2 := toL.(circuitbreaker.State)
	if !ok1 || !ok2 || int(from) >= nStates || int(to) >= nStates {
		// A state this package does not know: build its set each time.
		return addOpts(r.base, attrPreviousState.String(stateValue(fromL)), attrState.String(stateValue(toL)))
	}
	p := &r.trans[from][to]
	if opts := p.Load(); opts != nil {
		return *opts
	}
	opts := addOpts(r.base, attrPreviousState.String(stateValue(from)), attrState.String(stateValue(to)))
	p.CompareAndSwap(nil, &opts)
	return *p.Load()
}

// bulkheadRecorder records a bulkhead's admissions, rejections and
// releases.
type bulkheadRecorder struct {
	o                          *Observer
	g                          *gauged // nil without a snapshot
	queues                     bool    // the bulkhead may queue: record every wait
	name                       string
	base                       []attribute.KeyValue // the bulkhead's name
	active                     []metric.AddOption
	admitted, rejected         []metric.AddOption
	observed                   []metric.AddOption // a rejection in observe mode
	waitAdmitted, waitRejected []metric.RecordOption
}

func newBulkheadRecorder(o *Observer, name string) *bulkheadRecorder {
	base := []attribute.KeyValue{attrBulkheadName.String(name)}
	admitted, rejected := attrBulkheadOut.String("admitted"), attrBulkheadOut.String("rejected")
	return &bulkheadRecorder{
		o: o, name: name, base: base,
		active:       addOpts(base),
		admitted:     addOpts(base, admitted),
		rejected:     addOpts(base, rejected),
		observed:     observedOpts(base, resilience.KindBulkhead, actionReject),
		waitAdmitted: recordOpts(base, admitted),
		waitRejected: recordOpts(base, rejected),
	}
}

func (r *bulkheadRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventAcquired:
		r.o.bulkheadCalls.Add(ctx, 1, r.admitted...)
		r.o.bulkheadActive.Add(ctx, 1, r.active...)
		if r.queues || e.Duration > 0 {
			r.o.bulkheadWait.Record(ctx, e.Duration.Seconds(), r.waitAdmitted...)
		}
	case resilience.EventReleased:
		r.o.bulkheadActive.Add(ctx, -1, r.active...)
	case resilience.EventRejection:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindBulkhead, actionReject, e.Err)
			return
		}
		r.o.bulkheadCalls.Add(ctx, 1, r.rejected...)
		if r.queues || e.Duration > 0 {
			r.o.bulkheadWait.Record(ctx, e.Duration.Seconds(), r.waitRejected...)
		}
		if r.o.cfg.spanEvents {
			bulkheadRejectionEvent(ctx, r.name, e)
		}
	}
}

// retryRecorder records a retry policy's attempts and logical calls.
type retryRecorder struct {
	o        *Observer
	method   string // as the source named it, for span events
	attempts []metric.AddOption
	calls    [4][]metric.AddOption // success/failed × without/with retry
	observed []metric.AddOption    // a retry in observe mode
}

var retryOutcomeValues = [4]string{"success_without_retry", "success_with_retry", "failed_without_retry", "failed_with_retry"}

func newRetryRecorder(o *Observer, method string) *retryRecorder {
	base := o.methodAttrs(method)
	r := &retryRecorder{o: o, method: method, attempts: addOpts(base), observed: observedOpts(base, resilience.KindRetry, actionRetry)}
	for i, v := range retryOutcomeValues {
		r.calls[i] = addOpts(base, attrRetryOutcome.String(v))
	}
	return r
}

func (r *retryRecorder) Record(ctx context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventAttempt:
		r.o.retryAttempts.Add(ctx, 1, r.attempts...)
	case resilience.EventRetryDone:
		// A call succeeded when its final outcome is a Success (OK, or a
		// healthy answer such as NOT_FOUND as grpcmw classifies it); a
		// failure or an ignored outcome (cancelled, rejected) failed it.
		i := 0
		if e.Outcome != resilience.Success {
			i = 2
		}
		if e.Attempt > 1 {
			i++
		}
		r.o.retryCalls.Add(ctx, 1, r.calls[i]...)
	case resilience.EventRetry:
		if resilience.Observing(ctx) {
			r.o.observed(ctx, r.observed, resilience.KindRetry, actionRetry, e.Err)
			return
		}
		if r.o.cfg.spanEvents {
			retryEvent(ctx, r.method, e)
		}
	}
}

// timeoutRecorder records a timeout's calls.
type timeoutRecorder struct {
	o                   *Observer
	completed, timedOut []metric.AddOption
	observed            []metric.AddOption // a timeout in observe mode
}

func newTimeoutRecorder(o *Observer, method, scope string) *timeoutRecorder {
	if scope == "" {
		scope = "attempt" // package timeout's default scope
	}
	base := append(o.methodAttrs(method), attrTimeoutKind.String(scope))
	return &timeoutRecorder{
		o:         o,
		completed: addOpts(base, attrTimeoutOut.String("completed")),
		timedOut:  addOpts(base, attrTimeoutOut.String("timed_out")),
		observed:  observedOpts(base, resilience.KindTimeout, actionTimeOut),
	}
}

func (r *timeoutRecorder) Record(ctx context.Context, e resilience.Event) {
	if e.Type != resilience.EventCall {
		return
	}
	switch {
	case e.TimedOut && resilience.Observing(ctx):
		// Observe mode: the call went on, and completed; the timeout would
		// have cut it.
		r.o.timeoutCalls.Add(ctx, 1, r.completed...)
		r.o.observed(ctx, r.observed, resilience.KindTimeout, actionTimeOut, nil)
	case e.TimedOut:
		r.o.timeoutCalls.Add(ctx, 1, r.timedOut...)
	default:
		r.o.timeoutCalls.Add(ctx, 1, r.completed...)
	}
}

// callRecorder records the duration of a method's logical calls.
type callRecorder struct {
	o    *Observer
	base []attribute.KeyValue // rpc.system.name, rpc.method
	ok   []metric.RecordOption
	// errs maps each error.type value seen to its option slice. It is
	// replaced whole (copy on write, under mu) when a value is first seen, so
	// that reading it takes no lock; at most maxErrorTypes values, then
	// "_OTHER".
	mu   sync.Mutex
	errs atomic.Pointer[map[string][]metric.RecordOption]
}

func newCallRecorder(o *Observer, method string) *callRecorder {
	base := append([]attribute.KeyValue{attrRPCSystem.String("grpc")}, o.methodAttrs(method)...)
	r := &callRecorder{o: o, base: base, ok: recordOpts(base)}
	r.errs.Store(&map[string][]metric.RecordOption{})
	return r
}

func (r *callRecorder) Record(ctx context.Context, e resilience.Event) {
	if e.Type != resilience.EventCall {
		return
	}
	opts := r.ok
	switch {
	case e.ErrorType != "":
		opts = r.errorOpts(e.ErrorType)
	case e.Err != nil:
		opts = r.errorOpts(otherValue) // a failed call its sender did not name
	}
	r.o.callDuration.Record(ctx, e.Duration.Seconds(), opts...)
}

func (r *callRecorder) errorOpts(errorType string) []metric.RecordOption {
	if strings.HasPrefix(errorType, "CODE_") {
		// A code number no gRPC code has, from the server, as a sender other
		// than grpcmw (which writes _OTHER) may name it: not a value of its
		// own, so that a server cannot spend the bound on them.
		errorType = otherValue
	}
	if opts, ok := (*r.errs.Load())[errorType]; ok {
		return opts
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := *r.errs.Load()
	if opts, ok := cur[errorType]; ok {
		return opts
	}
	if len(cur) >= maxErrorTypes {
		errorType = otherValue
		if opts, ok := cur[errorType]; ok {
			return opts
		}
	}
	opts := recordOpts(r.base, attrErrorType.String(errorType))
	next := make(map[string][]metric.RecordOption, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[errorType] = opts
	r.errs.Store(&next)
	return opts
}

// The zero methods create a source's counter series at 0 (see Attach).

func (r *breakerRecorder) zero() {
	ctx := context.Background()
	for oc := range r.calls {
		for slow := range r.calls[oc] {
			r.o.breakerCalls.Add(ctx, 0, r.calls[oc][slow]...)
		}
	}
	r.o.breakerCalls.Add(ctx, 0, r.rejected...)
	// The automatic transitions; manual ones are rare and counted from their
	// first occurrence.
	for _, t := range [...][2]circuitbreaker.State{
		{circuitbreaker.StateClosed, circuitbreaker.StateOpen},
		{circuitbreaker.StateOpen, circuitbreaker.StateHalfOpen},
		{circuitbreaker.StateHalfOpen, circuitbreaker.StateClosed},
		{circuitbreaker.StateHalfOpen, circuitbreaker.StateOpen},
	} {
		r.o.breakerTransitions.Add(ctx, 0, r.transition(t[0], t[1])...)
	}
}

func (r *bulkheadRecorder) zero() {
	ctx := context.Background()
	r.o.bulkheadCalls.Add(ctx, 0, r.admitted...)
	r.o.bulkheadCalls.Add(ctx, 0, r.rejected...)
	r.o.bulkheadActive.Add(ctx, 0, r.active...)
}

func (r *retryRecorder) zero() {
	ctx := context.Background()
	r.o.retryAttempts.Add(ctx, 0, r.attempts...)
	for i := range r.calls {
		r.o.retryCalls.Add(ctx, 0, r.calls[i]...)
	}
}

func (r *timeoutRecorder) zero() {
	ctx := context.Background()
	r.o.timeoutCalls.Add(ctx, 0, r.completed...)
	r.o.timeoutCalls.Add(ctx, 0, r.timedOut...)
}

// Release stops observing the breaker's gauges (resilience.Releaser).
func (r *breakerRecorder) Release() { r.o.release(r.g) }

// Release stops observing the bulkhead's limit (resilience.Releaser).
func (r *bulkheadRecorder) Release() { r.o.release(r.g) }
