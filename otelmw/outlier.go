package otelmw

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/meshless/meshless/resilience"
)

// The outlier-ejection metrics of the catalogue.
const (
	metricOutlierEjections = "meshless.outlier.ejections"
	metricOutlierEjected   = "meshless.outlier.ejected"

	attrServerAddress = attribute.Key("server.address")
	attrOutlierReason = attribute.Key("meshless.outlier.reason")
)

// outlierReasons are the values of meshless.outlier.reason; any other reason
// is recorded as _OTHER.
var outlierReasons = [...]string{"consecutive_failures", "failure_percentage", "success_rate", "slow_calls"}

// OutlierListener records the outlier balancer's ejections as the
// catalogue's meshless.outlier.ejections (a counter, by server.address and
// meshless.outlier.reason) and meshless.outlier.ejected (1 while an endpoint
// is ejected, by server.address). It is a grpcmw/outlier Listener: pass it
// to outlier.WithListener. (otelmw does not import the balancer: the two
// meet through the Listener's method set.)
//
// server.address values come from the balancer, which only reports
// addresses its resolver gave it. An endpoint's series is kept while it is
// ejected and reported once at 0 after it returns, then dropped.
//
// An OutlierListener is safe for concurrent use.
type OutlierListener struct {
	ejections metric.Int64Counter
	ejected   metric.Int64ObservableUpDownCounter
	reg       metric.Registration // nil if registering the callback failed

	mu        sync.Mutex
	endpoints map[string]*outlierEndpoint
	// seen: the addresses recorded as themselves, at most maxOutlierAddrs;
	// others are recorded as _OTHER (a counter keeps every series it had).
	seen map[string]bool
}

type outlierEndpoint struct {
	ejected int                                         // balancers that have it ejected now
	adds    [len(outlierReasons) + 1][]metric.AddOption // by reason; the last is _OTHER
	observe []metric.ObserveOption
}

// NewOutlierListener returns an OutlierListener that records with a meter
// named [ScopeName] from mp; a nil mp means otel.GetMeterProvider(). An
// error from the meter provider goes to otel.Handle, and the listener
// records what it can; the error result is for future options.
func NewOutlierListener(mp metric.MeterProvider) (*OutlierListener, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	l := &OutlierListener{endpoints: map[string]*outlierEndpoint{}, seen: map[string]bool{}}
	l.ejections = instrument(m.Int64Counter(metricOutlierEjections,
		metric.WithUnit("{ejection}"),
		metric.WithDescription("Endpoints ejected from load balancing by outlier detection, by reason.")),
	)(noop.Int64Counter{})
	l.ejected = instrument(m.Int64ObservableUpDownCounter(metricOutlierEjected,
		metric.WithUnit("{endpoint}"),
		metric.WithDescription("1 while an endpoint is ejected from load balancing by outlier detection.")),
	)(noop.Int64ObservableUpDownCounter{})
	reg, err := m.RegisterCallback(l.observe, l.ejected)
	if err != nil {
		otel.Handle(err)
	} else {
		l.reg = reg
	}
	return l, nil
}

// maxOutlierAddrs bounds the endpoint addresses a listener records as
// themselves: addresses come from name resolution (pods come and go), and
// the ejections counter keeps a series for each it saw.
const maxOutlierAddrs = 1000

// endpoint returns addr's entry, made on first use. Called with l.mu held.
func (l *OutlierListener) endpoint(addr string) *outlierEndpoint {
	if e := l.endpoints[addr]; e != nil {
		return e
	}
	e := &outlierEndpoint{observe: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attrServerAddress.String(addr)))}}
	for i := range e.adds {
		reason := otherValue
		if i < len(outlierReasons) {
			reason = outlierReasons[i]
		}
		e.adds[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attrServerAddress.String(addr), attrOutlierReason.String(reason)))}
	}
	l.endpoints[addr] = e
	return e
}

// Ejected records that addr was ejected for reason.
func (l *OutlierListener) Ejected(addr, reason string) {
	l.mu.Lock()
	if !l.seen[addr] {
		if len(l.seen) < maxOutlierAddrs {
			l.seen[addr] = true
		} else {
			addr = otherValue
		}
	}
	e := l.endpoint(addr)
	e.ejected++
	i := len(outlierReasons)
	for k, r := range outlierReasons {
		if r == reason {
			i = k
		}
	}
	opts := e.adds[i]
	l.mu.Unlock()
	l.ejections.Add(context.Background(), 1, opts...)
}

// Returned records that addr is back in load balancing.
func (l *OutlierListener) Returned(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen[addr] {
		addr = otherValue // ejected past the bound
	}
	if e := l.endpoints[addr]; e != nil && e.ejected > 0 {
		e.ejected--
	}
}

func (l *OutlierListener) observe(_ context.Context, o metric.Observer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for addr, e := range l.endpoints {
		o.ObserveInt64(l.ejected, int64(e.ejected), e.observe...)
		if e.ejected == 0 {
			delete(l.endpoints, addr)
		}
	}
	return nil
}

// Close unregisters the callback of meshless.outlier.ejected. Ejections
// are still counted after Close.
func (l *OutlierListener) Close() error {
	if l.reg == nil {
		return nil
	}
	return l.reg.Unregister()
}

// outlierRecorder records a KindOutlier source's events (grpcmw's chain
// sends its balancer's ejections and returns as events) with the
// Observer's OutlierListener.
type outlierRecorder struct{ l *OutlierListener }

func (r outlierRecorder) Record(_ context.Context, e resilience.Event) {
	switch e.Type {
	case resilience.EventEjected:
		reason := otherValue
		if e.Reason != nil {
			reason = e.Reason.String()
		}
		r.l.Ejected(e.Endpoint, reason)
	case resilience.EventReturned:
		r.l.Returned(e.Endpoint)
	}
}
