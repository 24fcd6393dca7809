package otelmw

import (
	"strings"

	"github.com/meshless/meshless/circuitbreaker"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/meshless/meshless/resilience"
)

// Attribute keys. rpc.* and error.type are OpenTelemetry's semantic
// conventions; the rest are meshless's own.
const (
	attrBreakerName    = attribute.Key("meshless.circuit_breaker.name")
	attrState          = attribute.Key("meshless.circuit_breaker.state")
	attrPreviousState  = attribute.Key("meshless.circuit_breaker.previous_state")
	attrBreakerOutcome = attribute.Key("meshless.circuit_breaker.outcome")
	attrSlow           = attribute.Key("meshless.circuit_breaker.slow")
	attrRetryOutcome   = attribute.Key("meshless.retry.outcome")
	attrBulkheadName   = attribute.Key("meshless.bulkhead.name")
	attrBulkheadOut    = attribute.Key("meshless.bulkhead.outcome")
	attrTimeoutKind    = attribute.Key("meshless.timeout.kind")
	attrTimeoutOut     = attribute.Key("meshless.timeout.outcome")
	attrRPCSystem      = attribute.Key("rpc.system.name")
	attrMethod         = attribute.Key("rpc.method")
	attrErrorType      = attribute.Key("error.type")
)

// otherValue replaces an attribute value past its bound, as OpenTelemetry's
// conventions do for rpc.method and error.type.
const otherValue = "_OTHER"

// stateValues are the values of meshless.circuit_breaker.state, indexed by
// circuitbreaker.State.
var stateValues = func() (v [len(circuitbreaker.States)]string) {
	for i, s := range circuitbreaker.States {
		v[i] = strings.ToLower(s.String())
	}
	return v
}()

// stateValue returns the attribute value of a breaker state: "closed",
// "half_open", ...
func stateValue(l resilience.Label) string {
	if s, ok := l.(circuitbreaker.State); ok && int(s) < len(stateValues) {
		return stateValues[s]
	}
	if l == nil {
		return "unknown"
	}
	return strings.ToLower(l.String())
}

// newSet returns the set of base and extra. It copies them first:
// attribute.NewSet sorts the slice it is given in place.
func newSet(base []attribute.KeyValue, extra ...attribute.KeyValue) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(base)+len(extra))
	kvs = append(kvs, base...)
	kvs = append(kvs, extra...)
	return attribute.NewSet(kvs...)
}

// The option slices recorders pass as opts...: a slice built once, because
// even a lone prebuilt option passed as Add(ctx, 1, opt) allocates the
// variadic slice on every call (the call goes through an interface).

func addOpts(base []attribute.KeyValue, extra ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(newSet(base, extra...))}
}

func recordOpts(base []attribute.KeyValue, extra ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(newSet(base, extra...))}
}

func observeOpts(base []attribute.KeyValue, extra ...attribute.KeyValue) []metric.ObserveOption {
	return []metric.ObserveOption{metric.WithAttributeSet(newSet(base, extra...))}
}

// methodAttrs returns the rpc.method attribute of a retry, timeout or call
// source named name: none under WithoutMethod or for an unnamed source;
// "_OTHER" once maxMethods other names are in use.
func (o *Observer) methodAttrs(name string) []attribute.KeyValue {
	if !o.cfg.withMethod || name == "" {
		return nil
	}
	o.mu.Lock()
	if _, ok := o.methods[name]; !ok {
		if len(o.methods) < o.cfg.maxMethods {
			o.methods[name] = struct{}{}
		} else {
			name = otherValue
		}
	}
	o.mu.Unlock()
	return []attribute.KeyValue{attrMethod.String(name)}
}
