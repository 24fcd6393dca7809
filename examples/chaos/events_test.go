package main

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/deadletter"
)

// shortEventsConfig is the events scenario with shorter phases, its
// backends on net.Pipe and its temporary directory under t's: in a synctest
// bubble, every call, deferral, probe and replay happens at an exact fake
// time (the queue's file syncs take none of it).
func shortEventsConfig(t *testing.T) eventsConfig {
	t.Helper()
	cfg, err := defaultEventsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Phases[eventsHealthy].Duration = 500 * time.Millisecond
	cfg.Phases[eventsFailing].Duration = 2 * time.Second
	cfg.Phases[eventsRecovered].Duration = 3 * time.Second
	cfg.Quiet = true
	cfg.TempDir = t.TempDir()
	return cfg
}

const (
	eventsHealthy = iota
	eventsFailing
	eventsRecovered
)

// runEventsInBubble plays cfg in a synctest bubble over net.Pipe.
func runEventsInBubble(t *testing.T, cfg eventsConfig, w io.Writer) eventsSummary {
	t.Helper()
	var sum eventsSummary
	synctest.Test(t, func(t *testing.T) {
		cfg.Listen = listenMem
		var err error
		if sum, err = runEvents(t.Context(), cfg, w); err != nil {
			t.Fatalf("runEvents: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return sum
}

// Issue 22's demo: while the backend fails, bare's broker redelivers each
// event into the failure and gives up on it; meshless keeps it, and once
// the backend is back replays it, oldest first per key, once, with its
// replay id. Every figure comes from what the backends counted.
func TestEventsMeshlessKeepsWhatBareLoses(t *testing.T) {
	cfg := shortEventsConfig(t)
	var out bytes.Buffer
	sum := runEventsInBubble(t, cfg, &out)
	t.Logf("output:\n%s", out.String())
	if len(sum.Consumers) != 2 || sum.Consumers[0].Name != "bare" || sum.Consumers[1].Name != "meshless" {
		t.Fatalf("consumers %+v, want bare and meshless", sum.Consumers)
	}
	bare, mesh := sum.Consumers[0], sum.Consumers[1]
	want := int(cfg.Phases.total().Seconds() * float64(cfg.Rate))
	failingEvents := int(cfg.Phases[eventsFailing].Duration.Seconds() * float64(cfg.Rate))
	// The pacing may start a phase's first event a tick late: at most one
	// event short per phase.
	if sum.Published < want-len(cfg.Phases) || sum.Published > want || sum.Poison != 1 {
		t.Fatalf("%d events published, %d poison; want %d (or up to %d fewer), 1", sum.Published, sum.Poison, want, len(cfg.Phases))
	}

	// bare: every event published while the backend failed was delivered
	// 10 times into the failure and given up; the others were handled once
	// (but the poison one, given up too).
	if bare.Lost < failingEvents-2 || bare.Lost > failingEvents+2 || sum.NotHandled(bare) != bare.Lost {
		t.Errorf("bare lost %d events and never handled %d; want the %d published while the backend failed, and no other", bare.Lost, sum.NotHandled(bare), failingEvents)
	}
	if bare.Requests != bare.Handled+bare.Lost*cfg.Deliveries || bare.Replayed != 0 || bare.Deferred != 0 {
		t.Errorf("bare: %d requests for %d events handled and %d lost after %d deliveries each (%+v)", bare.Requests, bare.Handled, bare.Lost, cfg.Deliveries, bare)
	}

	// meshless: nothing lost. Every event was handled but the poison one,
	// parked after maxReplays failed replays; the queue drained.
	q := sum.Queue
	if mesh.Lost != 0 || sum.NotHandled(mesh) != 1 || q[deadletter.EventParked] != 1 || sum.Left != 0 {
		t.Errorf("meshless lost %d, never handled %d, parked %d, left %d in the queue; want 0, 1 (the poison event), 1, 0",
			mesh.Lost, sum.NotHandled(mesh), q[deadletter.EventParked], sum.Left)
	}
	if q[deadletter.EventDeferred] != mesh.Deferred || q[deadletter.EventReplayed] != mesh.Replayed || mesh.Replayed != mesh.Deferred-1 ||
		mesh.Deferred < failingEvents || q[deadletter.EventRefused] != 0 || q[deadletter.EventExpired] != 0 {
		t.Errorf("meshless's queue %v, consumer %+v: want every event of the outage kept, each replayed once but the parked one, none refused or expired", q, mesh)
	}
	if q[deadletter.EventFailed]+1 != 2 { // maxReplays: 2, the second failure parks
		t.Errorf("%d failed replays before the park, want 1 (maxReplays: 2)", q[deadletter.EventFailed])
	}
	// At least once, and here exactly once: no event, and no replay id,
	// handled twice.
	for _, r := range sum.Consumers {
		if r.Duplicates != 0 || r.ReplayIDDuplicates != 0 {
			t.Errorf("%s: %d duplicates, %d replay ids handled twice; want none", r.Name, r.Duplicates, r.ReplayIDDuplicates)
		}
	}
	// Order per key: the replays kept it among themselves; live events
	// handled after the breaker closed overtook the older ones waiting.
	if mesh.OutOfOrderReplays != 0 || mesh.OutOfOrder == 0 || bare.OutOfOrder != 0 {
		t.Errorf("out of order: meshless replays %d, meshless %d, bare %d; want 0, some, 0", mesh.OutOfOrderReplays, mesh.OutOfOrder, bare.OutOfOrder)
	}
	// The backend's load: bare redelivered into the failure; meshless's
	// breaker kept its calls off it, and each kept event cost one replay.
	if p := perEvent(mesh.Requests, sum.Published); p > 1.1 {
		t.Errorf("meshless: %.2f backend requests per event, want 1.1 at most", p)
	}
	if b, m := perEvent(bare.Requests, sum.Published), perEvent(mesh.Requests, sum.Published); b < 2*m {
		t.Errorf("backend requests per event: bare %.2f, meshless %.2f; want bare's twice meshless's or more", b, m)
	}

	// The breaker closed within its longest open wait of the recovery (1s,
	// plus the probes' calls), and the queue drained after it: at 500
	// replays a second, plus the poison event's backoff (1s after its
	// first failed replay, 1s after its park) and the round that follows.
	if sum.Closed < sum.Recovery || sum.Closed > sum.Recovery+time.Second+100*time.Millisecond {
		t.Errorf("the breaker closed at %v, the backend recovered at %v: want within 1.1s", sum.Closed, sum.Recovery)
	}
	drain := time.Duration(float64(mesh.Replayed)/500*float64(time.Second)) + 2*time.Second
	if sum.Drained < sum.Closed || sum.Drained > sum.Closed+drain+100*time.Millisecond {
		t.Errorf("the queue drained at %v, the breaker closed at %v: want within %v", sum.Drained, sum.Closed, drain)
	}
	if sum.HeldUp < 2*time.Second || sum.HeldUp > 2*time.Second+50*time.Millisecond {
		t.Errorf("held up behind the poison event for %v, want 2s (1s backoff after its first failed replay, 1s after its park)", sum.HeldUp)
	}

	// The run removed its temporary directory, the queue's file with it.
	if left, err := os.ReadDir(cfg.TempDir); err != nil || len(left) != 0 {
		t.Errorf("the run left %v in its temporary directory's parent (%v)", left, err)
	}
	for _, s := range []string{
		"summary (events): ",
		"given up by the broker after 10 deliveries (lost)",
		"parked in the dead-letter queue (for an operator)",
		"replays handled after a newer replay of their key",
		"  → bare lost ",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the summary lacks %q", s)
		}
	}
}

// A full queue refuses: the event gets its original rejection (the open
// breaker's), and the consumer falls back on the broker's redeliveries,
// which give it up. Every refusal is counted.
func TestEventsFullQueueRefuses(t *testing.T) {
	cfg := shortEventsConfig(t)
	cfg.MaxEntries = 50
	sum := runEventsInBubble(t, cfg, io.Discard)
	mesh := sum.Consumers[1]
	q := sum.Queue
	if q[deadletter.EventDeferred] != 50 || q[deadletter.EventRefused] < mesh.Lost*cfg.Deliveries || mesh.Lost == 0 {
		t.Errorf("queue %v, %d lost: want 50 kept, then every delivery of the others refused and the events given up", q, mesh.Lost)
	}
	if got := sum.NotHandled(mesh); got != mesh.Lost+q[deadletter.EventParked] {
		t.Errorf("meshless never handled %d events: want the %d lost and the %d parked", got, mesh.Lost, q[deadletter.EventParked])
	}
	if mesh.Duplicates != 0 || mesh.OutOfOrderReplays != 0 || sum.Left != 0 {
		t.Errorf("meshless: %+v, %d left: want no duplicate, replays in order, nothing left", mesh, sum.Left)
	}
}

func TestEventsRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]struct {
		bad  func(*eventsConfig)
		want string
	}{
		"rate":        {func(c *eventsConfig) { c.Rate = 0 }, "rate must be in [1, 10000]"},
		"keys":        {func(c *eventsConfig) { c.Keys = 0 }, "keys must be in [1, 1000]"},
		"deliveries":  {func(c *eventsConfig) { c.Deliveries = 0 }, "deliveries must be in [1, 100]"},
		"poison":      {func(c *eventsConfig) { c.Poison = -1 }, "poison events must be in [0, 100]"},
		"max entries": {func(c *eventsConfig) { c.MaxEntries = -1 }, "-events-max-entries"},
		"no phases": {func(c *eventsConfig) {
			for i := range c.Phases {
				c.Phases[i].Duration = 0
			}
		}, "must last some time"},
		"hanging phase":  {func(c *eventsConfig) { c.Phases[1].Behaviour = hanging }, "must be healthy or failing"},
		"too many":       {func(c *eventsConfig) { c.Phases[0].Duration = 2 * time.Hour }, "over 1000000"},
		"no dead letter": {func(c *eventsConfig) { c.Client.Defaults.DeadLetter = nil }, "needs a deadLetter section"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := shortEventsConfig(t)
			c.bad(&cfg)
			if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("validate: %v, want an error with %q", err, c.want)
			}
		})
	}
	cfg := shortEventsConfig(t)
	cfg.Rate = 0
	if _, err := runEvents(t.Context(), cfg, io.Discard); err == nil {
		t.Error("runEvents with rate 0: no error")
	}
}

// A backend reads its events from the wire: anything else is refused, and
// creates no state.
func TestParseEvent(t *testing.T) {
	for body, want := range map[string]bool{
		"1 2 3 0":                 true,
		"1 2 3 1":                 true,
		"9 0 0 0":                 true,
		"10 0 0 0":                false, // beyond the events published
		"1 2 3 2":                 false,
		"1 2 3":                   false,
		"-1 2 3 0":                false,
		"a b c d":                 false,
		"":                        false,
		strings.Repeat("1 ", 100): false,
	} {
		t.Run(body, func(t *testing.T) {
			if _, ok := parseEvent([]byte(body), 10); ok != want {
				t.Errorf("parseEvent(%q) ok = %v, want %v", body, ok, want)
			}
		})
	}
}

// The events scenario's flags set its options; -phase sets its phases.
func TestEventsFlags(t *testing.T) {
	pods, err := defaultPodsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := defaultClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := defaultEventsConfig()
	if err != nil {
		t.Fatal(err)
	}
	fs := flagSet()
	o, names := addScenarioFlags(fs, pods, cl, ev)
	if err := fs.Parse([]string{"-events-failing", "2s", "-events-max-entries", "7"}); err != nil {
		t.Fatal(err)
	}
	if o.Events.Phases[eventsFailing].Duration != 2*time.Second || o.Events.MaxEntries != 7 || ev.Phases[eventsFailing].Duration != 3*time.Second {
		t.Errorf("after -events-failing 2s -events-max-entries 7: %v, %d (the defaults: %v)", o.Events.Phases, o.Events.MaxEntries, ev.Phases)
	}
	if !slices.Contains(names, "-events-recovered") {
		t.Errorf("phase flags %v: no -events-recovered", names)
	}
	o.setPhases(300 * time.Millisecond)
	for _, p := range o.Events.Phases {
		if p.Duration != 300*time.Millisecond {
			t.Errorf("after -phase 300ms the events scenario's %s phase lasts %v", p.Name, p.Duration)
		}
	}
	// The client the run builds has the queue's file where the run says,
	// and the bound of -events-max-entries; the configuration it came from
	// is unchanged.
	c := o.Events.client("/tmp/x/deadletter.db")
	if dl := c.Defaults.DeadLetter; *dl.Path != "/tmp/x/deadletter.db" || *dl.MaxEntries != 7 || *ev.Client.Defaults.DeadLetter.Path != "deadletter.db" {
		t.Errorf("the run's deadLetter section: path %q, maxEntries %d; events.yaml's path %q", *dl.Path, *dl.MaxEntries, *ev.Client.Defaults.DeadLetter.Path)
	}
}

func TestPeakWaiting(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for name, c := range map[string]struct {
		in, out []time.Duration
		want    int
	}{
		"none":                {nil, nil, 0},
		"all in, none out":    {ms(1, 2, 3), nil, 3},
		"one at a time":       {ms(1, 3, 5), ms(2, 4, 6), 1},
		"a backlog, drained":  {ms(1, 2, 3, 4), ms(5, 6, 7, 8), 4},
		"out as the next in":  {ms(1, 2), ms(2, 3), 2}, // at 2ms one is in before the other is out
		"two peaks, the last": {ms(1, 2, 10, 11, 12), ms(3, 4, 13, 14, 15), 3},
	} {
		t.Run(name, func(t *testing.T) {
			if got := peakWaiting(c.in, c.out); got != c.want {
				t.Errorf("peakWaiting = %d, want %d", got, c.want)
			}
		})
	}
}
