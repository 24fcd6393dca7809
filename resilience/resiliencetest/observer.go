package resiliencetest

import (
	"context"
	"slices"
	"sync"

	"github.com/meshless/meshless/resilience"
)

// Observer is a [resilience.Observer] that keeps every source it was attached
// to and every event it received, in order. It is safe for concurrent use.
type Observer struct {
	mu      sync.Mutex
	sources []resilience.Source
	events  []Recorded
}

var _ resilience.Observer = (*Observer)(nil)

// Recorded is one event with the source that sent it.
type Recorded struct {
	Source resilience.Source
	Event  resilience.Event
}

// Attach records src and returns a recorder that keeps its events.
func (o *Observer) Attach(src resilience.Source) resilience.Recorder {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sources = append(o.sources, src)
	return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.events = append(o.events, Recorded{Source: src, Event: e})
	})
}

// Sources returns the sources attached so far.
func (o *Observer) Sources() []resilience.Source {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]resilience.Source(nil), o.sources...)
}

// Events returns the events received so far, optionally only those of the
// given types.
func (o *Observer) Events(types ...resilience.EventType) []resilience.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []resilience.Event
	for _, r := range o.events {
		if len(types) == 0 || slices.Contains(types, r.Event.Type) {
			out = append(out, r.Event)
		}
	}
	return out
}

// Recorded returns every event with its source.
func (o *Observer) Recorded() []Recorded {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Recorded(nil), o.events...)
}

// Trace returns the events received so far as "kind/scope:type" strings, in
// order ("retry:attempt", "timeout/overall:call"), for tests that check the
// order in which policies report.
func (o *Observer) Trace() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.events))
	for _, r := range o.events {
		s := r.Source.Kind.String()
		if r.Source.Scope != "" {
			s += "/" + r.Source.Scope
		}
		out = append(out, s+":"+r.Event.Type.String())
	}
	return out
}

// Reset forgets the events received so far (not the sources).
func (o *Observer) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = nil
}
