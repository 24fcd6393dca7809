// This file holds the events scenario: a consumer handles events from a
// broker, 200 a second, each with one gRPC call to a backend that fails for
// a few seconds, then recovers. Two consumers get the same events, each with
// its own backend:
//
//   - bare: the broker redelivers an event whose call failed at once, up to
//     10 deliveries in all, then gives up on it (the default of Spring for
//     Apache Kafka's error handler: 10 deliveries without back-off, then the
//     record is logged and skipped, or sent to a dead-letter topic);
//   - meshless: the same broker loop, its calls through a grpcmw chain
//     (events.yaml) whose dead-letter queue keeps, in a local bbolt file,
//     each event the breaker refuses or whose call failed. The consumer acks
//     it (the call returned DEFERRED), and the queue replays it once the
//     breaker has closed, with its meshless-replay-id.
//
// Each backend counts what it served, by event id and replay id. The
// events, backends and consumers are in eventsbackend.go, the running log
// and the summary in eventsreport.go.

package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// eventsYAML configures the events scenario's meshless consumer.
//
//go:embed events.yaml
var eventsYAML string

// eventsConfig is one play of the events scenario.
type eventsConfig struct {
	Phases     schedule      // the backend's behaviour: healthy or failing
	Rate       int           // events a second
	Keys       int           // the entities the events are about: order is per key
	Deliveries int           // the broker's deliveries of an event before it gives up on it
	Poison     int           // events the backend can never handle (INTERNAL), published while it fails
	Settle     time.Duration // after the last event, how long the run waits for the queue to drain
	MaxEntries int           // the queue's maxEntries, when not 0 (-events-max-entries)
	Client     *grpcmw.Config
	ClientYAML string
	Observer   resilience.Observer
	DeadLetter deadletter.Listener // hears the queue too (the metrics); nil for none
	Quiet      bool
	Listen     listenFunc // where the backends listen; nil: loopback TCP
	TempDir    string     // where the run makes its temporary directory; "": the system's
	// drained, if set, is called once the queue has drained (or the wait
	// is over), before the chain closes: the tests read /metrics there,
	// while the queue's gauges are still reported.
	drained func()
}

func defaultEventsConfig() (eventsConfig, error) {
	client, err := grpcmw.ParseConfig([]byte(eventsYAML))
	if err != nil {
		return eventsConfig{}, fmt.Errorf("events.yaml: %w", err)
	}
	return eventsConfig{
		Phases: schedule{
			{"healthy", healthy, time.Second},
			{"failing", failing, 3 * time.Second},
			{"recovered", healthy, 4 * time.Second},
		},
		Rate:       200,
		Keys:       8,
		Deliveries: 10,
		Poison:     1,
		Settle:     10 * time.Second,
		Client:     client,
		ClientYAML: eventsYAML,
	}, nil
}

func (c eventsConfig) validate() error {
	var errs []error
	if c.Rate < 1 || c.Rate > 10_000 {
		errs = append(errs, fmt.Errorf("the events scenario's rate must be in [1, 10000] events a second, got %d", c.Rate))
	}
	if c.Keys < 1 || c.Keys > 1000 {
		errs = append(errs, fmt.Errorf("the events scenario's keys must be in [1, 1000], got %d", c.Keys))
	}
	if c.Deliveries < 1 || c.Deliveries > 100 {
		errs = append(errs, fmt.Errorf("the events scenario's deliveries must be in [1, 100], got %d", c.Deliveries))
	}
	if c.Poison < 0 || c.Poison > 100 {
		errs = append(errs, fmt.Errorf("the events scenario's poison events must be in [0, 100], got %d", c.Poison))
	}
	if c.Settle < 0 {
		errs = append(errs, fmt.Errorf("the events scenario's settle time must not be negative, got %v", c.Settle))
	}
	if c.MaxEntries < 0 {
		errs = append(errs, fmt.Errorf("-events-max-entries must be 0 (events.yaml's) or more, got %d", c.MaxEntries))
	}
	for _, p := range c.Phases {
		if p.Duration < 0 {
			errs = append(errs, fmt.Errorf("the events scenario's %s phase must not be negative, got %v", p.Name, p.Duration))
		}
		if p.Behaviour != healthy && p.Behaviour != failing {
			errs = append(errs, fmt.Errorf("the events scenario's %s phase must be healthy or failing, got %v", p.Name, p.Behaviour))
		}
	}
	if c.Phases.total() <= 0 {
		errs = append(errs, errors.New("the events scenario's phases must last some time"))
	}
	if n := c.planned(); n > 1_000_000 {
		errs = append(errs, fmt.Errorf("the events scenario would publish %d events, over 1000000: shorten its phases or lower -rate", n))
	}
	if c.Client == nil || c.Client.Defaults.DeadLetter == nil {
		errs = append(errs, errors.New("the events consumer needs a deadLetter section in defaults"))
	} else if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// planned is how many events the schedule publishes, at most.
func (c eventsConfig) planned() int {
	n := 0.0
	for _, p := range c.Phases {
		n += p.Duration.Seconds()*float64(c.Rate) + 1
	}
	return int(n)
}

// client is the configuration with its queue's file at path (and
// MaxEntries, if set); cfg.Client itself is not changed.
func (c eventsConfig) client(path string) *grpcmw.Config {
	client := *c.Client
	dl := *client.Defaults.DeadLetter
	dl.Path = &path
	if c.MaxEntries > 0 {
		dl.MaxEntries = &c.MaxEntries
	}
	client.Defaults.DeadLetter = &dl
	return &client
}

// recovery is when the backend recovers: the start of the first healthy
// phase after a failing one; -1 if it never does.
func (c eventsConfig) recovery() time.Duration {
	failed := false
	for i, p := range c.Phases {
		switch {
		case p.Behaviour == failing && p.Duration > 0:
			failed = true
		case failed && p.Behaviour == healthy && p.Duration > 0:
			return c.Phases.start(i)
		}
	}
	return -1
}

// dlRecorder hears the meshless consumer's dead-letter queue: it counts
// each event, dates them for the picture, knows the backlog (entries
// deferred and not yet replayed, parked, expired or dropped) and when it
// last emptied, and passes everything on to next (the metrics).
type dlRecorder struct {
	next  deadletter.Listener
	start time.Time

	mu      sync.Mutex
	counts  map[string]int
	at      map[string][]time.Duration // by recKind: bounded by maxTallies
	backlog int
	peak    int
	emptied time.Duration // since start, when the backlog last went to 0; -1: never
}

// What dlRecorder dates.
const (
	recDeferred = "deferred" // into the backlog (deferred, requeued)
	recResolved = "resolved" // out of it: replayed, parked, expired, dropped
	recReplayed = "replayed"
	recStuck    = "stuck" // a failed replay, or the one that parked its entry
)

func newDLRecorder(next deadletter.Listener) *dlRecorder {
	return &dlRecorder{next: next, counts: map[string]int{}, at: map[string][]time.Duration{}, emptied: -1}
}

func (r *dlRecorder) begin(start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start = start
}

// Entries implements deadletter.Listener.
func (r *dlRecorder) Entries(key, ev string, n int) {
	if r.next != nil {
		r.next.Entries(key, ev, n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Since(r.start)
	r.counts[ev] += n
	var kinds []string
	switch ev {
	case deadletter.EventDeferred, deadletter.EventRequeued:
		kinds = []string{recDeferred}
		r.backlog += n
		r.peak = max(r.peak, r.backlog)
	case deadletter.EventReplayed, deadletter.EventParked, deadletter.EventExpired, deadletter.EventDropped:
		kinds = []string{recResolved}
		r.backlog -= n
		if r.backlog <= 0 {
			r.emptied = at
		}
	}
	switch ev {
	case deadletter.EventReplayed:
		kinds = append(kinds, recReplayed)
	case deadletter.EventFailed, deadletter.EventParked:
		kinds = append(kinds, recStuck)
	}
	for _, kind := range kinds {
		for range n {
			if len(r.at[kind]) < maxTallies {
				r.at[kind] = append(r.at[kind], at)
			}
		}
	}
}

// Watch implements deadletter.Listener: the gauges are the metrics'.
func (r *dlRecorder) Watch(key string, read func() (waiting, parked int64, oldest time.Duration)) func() {
	if r.next != nil {
		return r.next.Watch(key, read)
	}
	return func() {}
}

// waiting is the backlog now.
func (r *dlRecorder) waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.backlog
}

// breakerLog records the transitions of the meshless consumer's breaker.
type breakerLog struct {
	start time.Time
	mu    sync.Mutex
	list  []change // bounded by maxChanges
}

func (l *breakerLog) observer() resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindCircuitBreaker {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type != resilience.EventTransition {
				return
			}
			state := stateClosed
			switch e.To {
			case circuitbreaker.StateOpen, circuitbreaker.StateForcedOpen:
				state = stateOpen
			case circuitbreaker.StateHalfOpen:
				state = stateHalfOpen
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if !l.start.IsZero() && len(l.list) < maxChanges {
				l.list = append(l.list, change{At: time.Since(l.start), State: state})
			}
		})
	})
}

func (l *breakerLog) changes() []change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]change(nil), l.list...)
}

// state is the breaker's state now.
func (l *breakerLog) state() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) == 0 {
		return stateClosed
	}
	return l.list[len(l.list)-1].State
}

// runEvents plays the events scenario, tells it on w (unless cfg.Quiet),
// prints its summary on w and returns it, once every event has ended and
// the queue has drained (or cfg.Settle is over); early if ctx ends. The
// queue's file lives in a temporary directory that the run removes.
func runEvents(ctx context.Context, cfg eventsConfig, w io.Writer) (eventsSummary, error) {
	if err := cfg.validate(); err != nil {
		return eventsSummary{}, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "meshless-chaos-events-")
	if err != nil {
		return eventsSummary{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "deadletter.db")

	rec := newDLRecorder(cfg.DeadLetter)
	brk := &breakerLog{}
	chain, err := grpcmw.New(cfg.client(path), grpcmw.WithObserver(resilience.Observers(cfg.Observer, brk.observer())), grpcmw.WithDeadLetterListener(rec))
	if err != nil {
		return eventsSummary{}, err
	}
	defer chain.Close()
	listen := cfg.Listen
	if listen == nil {
		listen = listenTCP
	}
	planned := cfg.planned()
	var consumers []*eventConsumer
	defer func() {
		for _, c := range consumers {
			c.conn.Close()
			c.srv.Stop()
		}
	}()
	for _, c := range []struct {
		name, about string
		opts        []grpc.DialOption
	}{
		{"bare", fmt.Sprintf("redelivered at once when its call fails, %d deliveries, then given up", cfg.Deliveries), nil},
		{"meshless", "the same, its calls through a meshless chain (events.yaml): kept in a local bbolt file, replayed", append(chain.DialOptions(), grpc.WithDisableRetry())},
	} {
		lis, target, dial, err := listen()
		if err != nil {
			return eventsSummary{}, err
		}
		b := newEventBackend(planned)
		srv := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(srv, b)
		go srv.Serve(lis) //nolint:errcheck // Serve returns once Stop is called
		conn, err := grpc.NewClient(target, append(append(c.opts, dial...), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			srv.Stop()
			return eventsSummary{}, err
		}
		consumers = append(consumers, &eventConsumer{name: c.name, about: c.about, backend: b, srv: srv, conn: conn,
			stub: testgrpc.NewTestServiceClient(conn), deliveries: cfg.Deliveries})
	}

	tw := w
	if cfg.Quiet {
		tw = io.Discard
	}
	s := &eventsStory{w: tw, cfg: cfg, consumers: consumers, rec: rec, brk: brk, path: path}
	s.header()

	start := time.Now()
	rec.begin(start)
	brk.mu.Lock()
	brk.start = start
	brk.mu.Unlock()
	for _, c := range consumers {
		c.backend.mu.Lock()
		c.backend.start = start
		c.backend.mu.Unlock()
	}
	// Each consumer takes a key's events one at a time, in order, as a
	// broker's partition is consumed: a goroutine per key, fed by a queue
	// that holds every event the schedule can publish for it.
	pub := &publisher{cfg: cfg}
	var wg sync.WaitGroup
	feeds := make([][]chan event, len(consumers))
	for i, c := range consumers {
		for range cfg.Keys {
			ch := make(chan event, planned/cfg.Keys+1)
			feeds[i] = append(feeds[i], ch)
			wg.Go(func() {
				for e := range ch {
					c.consume(ctx, e)
				}
			})
		}
	}
	sched := cfg.Phases
	tick := time.NewTicker(max(time.Second/time.Duration(cfg.Rate), time.Millisecond))
	defer tick.Stop()
	cur, startedBefore := -1, 0
	nextStatus := time.Second
	for {
		el := time.Since(start)
		p := sched.at(el)
		if ctx.Err() != nil {
			p = len(sched)
		}
		if cur >= 0 && (p != cur || el >= nextStatus) {
			s.status(el, sched[cur].Name, pub.published())
			for nextStatus <= el {
				nextStatus += time.Second
			}
		}
		if p == len(sched) {
			break
		}
		if p != cur {
			cur, startedBefore = p, pub.published()
			for _, c := range consumers {
				c.backend.mode.Store(int32(sched[p].Behaviour))
			}
			s.phase(el, p)
		}
		due := startedBefore + int((el-sched.start(p)).Seconds()*float64(cfg.Rate))
		for pub.published() < due && pub.published() < planned {
			e := pub.next(p, pub.published()-startedBefore, el)
			for i := range consumers {
				feeds[i][e.Key] <- e // never blocks: room for every event of the key
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	for _, f := range feeds {
		for _, ch := range f {
			close(ch)
		}
	}
	streamEnd := time.Since(start)
	wg.Wait()

	// No more events: wait for the queue to drain, up to cfg.Settle.
	if rec.waiting() > 0 && ctx.Err() == nil {
		s.settling(time.Since(start), rec.waiting())
		deadline := time.Now().Add(cfg.Settle)
		for rec.waiting() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			if sleep(ctx, min(100*time.Millisecond, time.Until(deadline))) != nil {
				break
			}
			if el := time.Since(start); el >= nextStatus {
				s.status(el, "draining", pub.published())
				nextStatus += time.Second
			}
		}
		state := "drained"
		if rec.waiting() > 0 {
			state = "not drained"
		}
		s.status(time.Since(start), state, pub.published())
	}
	if cfg.drained != nil {
		cfg.drained()
	}
	elapsed := time.Since(start)
	chain.Close() // the queue stops: an entry still waiting stays in the file, removed with the directory
	sum := summarizeEvents(cfg, consumers, rec, brk, pub, streamEnd, elapsed)
	sum.Interrupted = ctx.Err() != nil
	sum.print(w)
	return sum, nil
}

// publisher makes the events, spread over the keys in turn, the poison
// ones in the middle of the first failing phase.
type publisher struct {
	cfg      eventsConfig
	n        int
	seqs     []int           // by key, the next event's place
	at       []time.Duration // when each was published, since the start
	poisoned []int64         // the poison events' ids: at most cfg.Poison
}

func (p *publisher) published() int { return p.n }

// next publishes an event: the j-th of phase ph, at el.
func (p *publisher) next(ph, j int, el time.Duration) event {
	if p.seqs == nil {
		p.seqs = make([]int, p.cfg.Keys)
	}
	e := event{ID: int64(p.n), Key: p.n % p.cfg.Keys}
	e.Seq = p.seqs[e.Key]
	p.seqs[e.Key]++
	if ph == p.poisonPhase() {
		n := int(p.cfg.Phases[ph].Duration.Seconds() * float64(p.cfg.Rate))
		for k := range p.cfg.Poison {
			if j == n*(k+1)/(p.cfg.Poison+1) && !e.Poison {
				e.Poison = true
				p.poisoned = append(p.poisoned, e.ID)
			}
		}
	}
	p.n++
	if len(p.at) < maxTallies {
		p.at = append(p.at, el)
	}
	return e
}

// poisonPhase is the first failing phase; -1 if none.
func (p *publisher) poisonPhase() int {
	for i, ph := range p.cfg.Phases {
		if ph.Behaviour == failing && ph.Duration > 0 {
			return i
		}
	}
	return -1
}
