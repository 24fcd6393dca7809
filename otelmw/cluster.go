package otelmw

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// The cluster-mode metrics of the catalogue.
const (
	metricClusterSyncs       = "meshless.cluster.syncs"
	metricClusterConnected   = "meshless.cluster.connected"
	metricClusterRemoteOpens = "meshless.cluster.remote_opens"

	attrClusterOutcome = attribute.Key("meshless.cluster.outcome")
)

// maxClusterNames bounds the breaker names ClusterListener keeps a series
// for; past it, names are recorded as _OTHER.
const maxClusterNames = 1000

// ClusterListener records cluster mode as the catalogue's
// meshless.cluster.syncs (a counter by meshless.cluster.outcome, ok or
// error), meshless.cluster.connected (1 while Redis answers) and
// meshless.cluster.remote_opens (a counter by meshless.circuit_breaker.name
// of the breakers opened by another instance's decision). It is a
// cluster.Listener: pass it to cluster.WithListener or
// grpcmw.WithClusterListener. (otelmw does not import package cluster, nor
// Redis: the two meet through the Listener's method set.)
//
// One listener may serve several clusters (chains): connected then reports
// how many of them Redis answers.
//
// A ClusterListener is safe for concurrent use.
type ClusterListener struct {
	syncs       metric.Int64Counter
	connected   metric.Int64ObservableUpDownCounter
	remoteOpens metric.Int64Counter
	reg         metric.Registration // nil if registering the callback failed

	ok, failed []metric.AddOption
	up         atomic.Int64

	mu    sync.Mutex
	names map[string][]metric.AddOption
}

// NewClusterListener returns a ClusterListener that records with a meter
// named [ScopeName] from mp; a nil mp means otel.GetMeterProvider(). An
// error from the meter provider goes to otel.Handle, and the listener
// records what it can; the error result is for future options.
func NewClusterListener(mp metric.MeterProvider) (*ClusterListener, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	l := &ClusterListener{
		ok:     []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrClusterOutcome.String("ok")))},
		failed: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrClusterOutcome.String("error")))},
		names:  map[string][]metric.AddOption{},
	}
	l.syncs = instrument(m.Int64Counter(metricClusterSyncs,
		metric.WithUnit("{sync}"),
		metric.WithDescription("Syncs of cluster mode with Redis, by outcome.")),
	)(noop.Int64Counter{})
	l.connected = instrument(m.Int64ObservableUpDownCounter(metricClusterConnected,
		metric.WithUnit("1"),
		metric.WithDescription("1 while Redis answers cluster mode's syncs.")),
	)(noop.Int64ObservableUpDownCounter{})
	l.remoteOpens = instrument(m.Int64Counter(metricClusterRemoteOpens,
		metric.WithUnit("{transition}"),
		metric.WithDescription("Breakers opened by another instance's decision, through cluster mode.")),
	)(noop.Int64Counter{})
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(l.connected, l.up.Load())
		return nil
	}, l.connected)
	if err != nil {
		otel.Handle(err)
	} else {
		l.reg = reg
	}
	return l, nil
}

// Synced records one sync.
func (l *ClusterListener) Synced(ok bool) {
	opts := l.failed
	if ok {
		opts = l.ok
	}
	l.syncs.Add(context.Background(), 1, opts...)
}

// Connected records that Redis started (up) or stopped answering a
// cluster.
func (l *ClusterListener) Connected(up bool) {
	if up {
		l.up.Add(1)
	} else if l.up.Add(-1) < 0 {
		l.up.Store(0)
	}
}

// RemoteOpen records that the breaker named name opened because another
// instance opened the same key.
func (l *ClusterListener) RemoteOpen(name string) {
	l.mu.Lock()
	opts, ok := l.names[name]
	if !ok {
		if len(l.names) >= maxClusterNames {
			name = otherValue
			opts = l.names[name]
		}
		if opts == nil {
			opts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrBreakerName.String(name)))}
			l.names[name] = opts
		}
	}
	l.mu.Unlock()
	l.remoteOpens.Add(context.Background(), 1, opts...)
}

// Close unregisters the callback of meshless.cluster.connected. Syncs and
// remote opens are still counted after Close.
func (l *ClusterListener) Close() error {
	if l.reg == nil {
		return nil
	}
	return l.reg.Unregister()
}
