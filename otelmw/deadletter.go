package otelmw

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// The dead-letter metrics of the catalogue.
const (
	metricDeadLetterEntries = "meshless.deadletter.entries"
	metricDeadLetterDepth   = "meshless.deadletter.depth"
	metricDeadLetterAge     = "meshless.deadletter.oldest.age"

	attrDeadLetterKey   = attribute.Key("meshless.deadletter.key")
	attrDeadLetterEvent = attribute.Key("meshless.deadletter.event")
	attrDeadLetterState = attribute.Key("meshless.deadletter.state")
)

// deadLetterEvents are the values of meshless.deadletter.event (the
// deadletter package's Event names); any other is recorded as _OTHER.
var deadLetterEvents = [...]string{"deferred", "refused", "replayed", "failed", "parked", "expired", "dropped", "requeued", "purged"}

// maxDeadLetterKeys bounds the keys DeadLetterListener keeps series for;
// past it, keys are recorded as _OTHER.
const maxDeadLetterKeys = 1000

// DeadLetterListener records dead-letter queues (package deadletter) as
// the catalogue's meshless.deadletter.entries (a counter of entries by
// meshless.deadletter.key and meshless.deadletter.event: deferred,
// refused, replayed, failed, parked, expired, dropped, requeued, purged),
// meshless.deadletter.depth (entries by key and meshless.deadletter.state,
// waiting or parked) and meshless.deadletter.oldest.age (seconds the
// oldest waiting entry of a key has waited). It is a deadletter.Listener:
// pass it to deadletter.WithListener. (otelmw does not import package
// deadletter: the two meet through the Listener's method set.)
//
// Keys come from configuration; past 1000 of them, further keys are
// recorded as _OTHER. When several queues report one key (they share a
// store), its gauges report the largest figures. A key's gauges stop when
// its last queue closes.
//
// A DeadLetterListener is safe for concurrent use.
type DeadLetterListener struct {
	entries metric.Int64Counter
	depth   metric.Int64ObservableUpDownCounter
	age     metric.Float64ObservableGauge
	reg     metric.Registration // nil if registering the callback failed

	mu   sync.Mutex
	keys map[string]*deadLetterKey
	seq  int
}

type deadLetterKey struct {
	adds            [len(deadLetterEvents) + 1][]metric.AddOption // by event; the last is _OTHER
	waiting, parked []metric.ObserveOption
	age             []metric.ObserveOption
	readers         map[int]func() (int64, int64, time.Duration)
}

// NewDeadLetterListener returns a DeadLetterListener that records with a
// meter named [ScopeName] from mp; a nil mp means otel.GetMeterProvider().
// An error from the meter provider goes to otel.Handle, and the listener
// records what it can; the error result is for future options.
func NewDeadLetterListener(mp metric.MeterProvider) (*DeadLetterListener, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	l := &DeadLetterListener{keys: map[string]*deadLetterKey{}}
	l.entries = instrument(m.Int64Counter(metricDeadLetterEntries,
		metric.WithUnit("{entry}"),
		metric.WithDescription("Dead-letter entries by what happened to them: deferred, refused, replayed, failed, parked, expired, dropped, requeued, purged.")),
	)(noop.Int64Counter{})
	l.depth = instrument(m.Int64ObservableUpDownCounter(metricDeadLetterDepth,
		metric.WithUnit("{entry}"),
		metric.WithDescription("Dead-letter entries kept, waiting for a replay or parked.")),
	)(noop.Int64ObservableUpDownCounter{})
	l.age = instrument(m.Float64ObservableGauge(metricDeadLetterAge,
		metric.WithUnit("s"),
		metric.WithDescription("How long the oldest waiting dead-letter entry of a key has waited.")),
	)(noop.Float64ObservableGauge{})
	reg, err := m.RegisterCallback(l.observe, l.depth, l.age)
	if err != nil {
		otel.Handle(err)
	} else {
		l.reg = reg
	}
	return l, nil
}

// key returns key's entry, made on first use, or _OTHER's past the bound.
// Called with l.mu held.
func (l *DeadLetterListener) key(key string) *deadLetterKey {
	if k := l.keys[key]; k != nil {
		return k
	}
	if len(l.keys) >= maxDeadLetterKeys {
		key = otherValue
		if k := l.keys[key]; k != nil {
			return k
		}
	}
	kv := attrDeadLetterKey.String(key)
	k := &deadLetterKey{
		waiting: []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv, attrDeadLetterState.String("waiting")))},
		parked:  []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv, attrDeadLetterState.String("parked")))},
		age:     []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv))},
		readers: map[int]func() (int64, int64, time.Duration){},
	}
	for i := range k.adds {
		event := otherValue
		if i < len(deadLetterEvents) {
			event = deadLetterEvents[i]
		}
		k.adds[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv, attrDeadLetterEvent.String(event)))}
	}
	l.keys[key] = k
	return k
}

// Entries records that n of key's entries went through event.
func (l *DeadLetterListener) Entries(key, event string, n int) {
	if n <= 0 {
		return
	}
	i := len(deadLetterEvents)
	for j, e := range deadLetterEvents {
		if e == event {
			i = j
			break
		}
	}
	l.mu.Lock()
	opts := l.key(key).adds[i]
	l.mu.Unlock()
	l.entries.Add(context.Background(), int64(n), opts...)
}

// Watch makes read the source of key's gauges until the returned function
// is called.
func (l *DeadLetterListener) Watch(key string, read func() (waiting, parked int64, oldest time.Duration)) (unwatch func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.key(key)
	l.seq++
	id := l.seq
	k.readers[id] = read
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(k.readers, id)
		})
	}
}

func (l *DeadLetterListener) observe(_ context.Context, o metric.Observer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.keys {
		if len(k.readers) == 0 {
			continue
		}
		var waiting, parked int64
		var age time.Duration
		for _, read := range k.readers {
			w, p, a := read()
			waiting, parked, age = max(waiting, w), max(parked, p), max(age, a)
		}
		o.ObserveInt64(l.depth, waiting, k.waiting...)
		o.ObserveInt64(l.depth, parked, k.parked...)
		o.ObserveFloat64(l.age, age.Seconds(), k.age...)
	}
	return nil
}

// Close unregisters the callback of the gauges. Entries are still counted
// after Close.
func (l *DeadLetterListener) Close() error {
	if l.reg == nil {
		return nil
	}
	return l.reg.Unregister()
}
