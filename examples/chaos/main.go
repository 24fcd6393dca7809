// Command chaos shows what a circuit breaker does for a client whose
// dependency goes bad.
//
// Two clients call the same kind of dependency at the same rate, side by
// side, each call in its own goroutine as a server handling requests would:
//
//   - bare calls it with a per-call timeout and nothing else;
//   - meshless makes the same call through a meshless circuit breaker.
//
// The dependency runs through a schedule of phases: healthy, failing (it
// answers "unavailable" at once), hanging (it never answers) and healthy
// again. The program prints the breaker's transitions and a status line per
// second as it goes, then a summary: how many calls reached the dependency,
// how fast the clients answered, and how many goroutines piled up while the
// dependency hung.
//
//	go run ./examples/chaos            # about 13 seconds
//	go run ./examples/chaos -phase 1s  # every phase 1s long
//	go run ./examples/chaos -help      # phases, rate, timeout
//
// Everything runs in one process on the real clock; nothing is listened on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

// config is one run of the scenario.
type config struct {
	Schedule schedule
	Rate     int           // calls per second, per client
	Timeout  time.Duration // the deadline of each call
	Latency  time.Duration // how long a healthy dependency takes to answer
	Breaker  breakerConfig // the meshless client's breaker
	Quiet    bool          // print the summary only
}

// breakerConfig is the meshless client's circuit breaker: a small window, so
// that it reacts within a few dozen calls.
type breakerConfig struct {
	Window      int           // COUNT_BASED sliding window, in calls
	MinCalls    int           // no decision with fewer calls in the window
	FailureRate float64       // open at or above this failure rate, in percent
	SlowCall    time.Duration // a call slower than this is slow
	SlowRate    float64       // open at or above this slow-call rate, in percent
	OpenWait    time.Duration // stay open this long (doubled on each re-open)
	Probes      int           // calls let through in HALF_OPEN
}

func (b breakerConfig) options() []circuitbreaker.Option {
	return []circuitbreaker.Option{
		circuitbreaker.WithSlidingWindowType(circuitbreaker.CountBased),
		circuitbreaker.WithSlidingWindowSize(b.Window),
		circuitbreaker.WithMinimumNumberOfCalls(b.MinCalls),
		circuitbreaker.WithFailureRateThreshold(b.FailureRate),
		circuitbreaker.WithSlowCallDurationThreshold(b.SlowCall),
		circuitbreaker.WithSlowCallRateThreshold(b.SlowRate),
		circuitbreaker.WithWaitDurationInOpenState(b.OpenWait),
		circuitbreaker.WithPermittedNumberOfCallsInHalfOpenState(b.Probes),
	}
}

func defaultConfig() config {
	return config{
		Schedule: schedule{
			{healthy, 2 * time.Second},
			{failing, 3 * time.Second},
			{hanging, 4 * time.Second},
			{healthy, 4 * time.Second},
		},
		Rate:    200,
		Timeout: 500 * time.Millisecond,
		Latency: 2 * time.Millisecond,
		Breaker: breakerConfig{
			Window:      20,
			MinCalls:    10,
			FailureRate: 50,
			SlowCall:    300 * time.Millisecond,
			SlowRate:    50,
			OpenWait:    time.Second,
			Probes:      3,
		},
	}
}

func (c config) validate() error {
	var errs []error
	if c.Rate < 1 || c.Rate > 100_000 {
		errs = append(errs, fmt.Errorf("rate must be in [1, 100000] calls per second, got %d", c.Rate))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %v", c.Timeout))
	}
	for _, p := range c.Schedule {
		if p.Duration < 0 {
			errs = append(errs, fmt.Errorf("the %s phase must not be negative, got %v", p, p.Duration))
		}
	}
	if c.Schedule.total() <= 0 {
		errs = append(errs, errors.New("the phases must last some time"))
	}
	return errors.Join(errs...)
}

func main() {
	cfg := defaultConfig()
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: go run ./examples/chaos [flags]\n\n"+
			"Two clients call a dependency that turns healthy, failing, hanging, then healthy again:\n"+
			"one with a timeout alone, one behind a meshless circuit breaker. Flags:\n\n")
		flag.PrintDefaults()
	}
	flag.DurationVar(&cfg.Schedule[0].Duration, "healthy", cfg.Schedule[0].Duration, "length of the first, healthy phase")
	flag.DurationVar(&cfg.Schedule[1].Duration, "failing", cfg.Schedule[1].Duration, "length of the phase in which the dependency fails fast")
	flag.DurationVar(&cfg.Schedule[2].Duration, "hanging", cfg.Schedule[2].Duration, "length of the phase in which the dependency never answers")
	flag.DurationVar(&cfg.Schedule[3].Duration, "recovered", cfg.Schedule[3].Duration, "length of the last, healthy again phase")
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "calls per second, per client")
	flag.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "deadline of each call")
	flag.BoolVar(&cfg.Quiet, "quiet", false, "print the summary only")
	every := flag.Duration("phase", 0, "length of every phase, when set (overrides the four above)")
	flag.Parse()
	if *every != 0 {
		for i := range cfg.Schedule {
			cfg.Schedule[i].Duration = *every
		}
	}

	// Ctrl-C ends the run early; the summary covers what ran.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// run plays the scenario, tells it on w (unless cfg.Quiet), prints the
// summary on w and returns it. It returns once every call has finished, early
// if ctx ends.
func run(ctx context.Context, cfg config, w io.Writer) (summary, error) {
	if err := cfg.validate(); err != nil {
		return summary{}, err
	}
	start := time.Now()
	events := make(chan transition, 64)
	clients, err := newClients(cfg, transitionsTo(events, start))
	if err != nil {
		return summary{}, err
	}
	tw := w
	if cfg.Quiet {
		tw = io.Discard
	}
	s := newStory(tw, cfg, clients)
	s.header()

	// Pace the calls: on each tick, start as many as the rate says are due
	// by now, so that a late tick is made up for. Each call runs in its own
	// goroutine; nothing waits for one before starting the next.
	var wg sync.WaitGroup
	tick := time.NewTicker(max(time.Second/time.Duration(cfg.Rate), time.Millisecond))
	defer tick.Stop()
	cur, started := -1, int64(0)
	nextStatus := time.Second
	sched := cfg.Schedule
	for {
		el := time.Since(start)
		p := sched.at(el)
		if ctx.Err() != nil {
			p = len(sched)
		}
		if cur >= 0 && (p != cur || el >= nextStatus) {
			s.status(el, sched[cur].String())
			for nextStatus <= el {
				nextStatus += time.Second
			}
		}
		if p == len(sched) {
			break
		}
		if p != cur {
			cur = p
			for _, c := range clients {
				c.dep.set(sched[p].Behaviour)
			}
			s.phase(el, p)
		}
		for due := int64(el.Seconds() * float64(cfg.Rate)); started < due; started++ {
			for _, c := range clients {
				c.st.begin(p)
				wg.Go(func() { c.call(ctx, p, cfg.Timeout) })
			}
		}
		select {
		case <-ctx.Done():
		case tr := <-events:
			s.transition(tr)
		case <-tick.C:
		}
	}

	// The calls still in flight end by their timeouts at the latest.
	waited := s.draining(time.Since(start))
	wg.Wait()
	if waited {
		s.status(time.Since(start), "drained")
	}
	for drained := false; !drained; {
		select {
		case tr := <-events:
			s.transition(tr)
		default:
			drained = true
		}
	}

	sum := summarize(cfg, clients, s.transitions, time.Since(start))
	sum.Interrupted = ctx.Err() != nil
	sum.print(w)
	return sum, nil
}

// transitionsTo is an observer that sends every breaker transition to ch,
// stamped with the time since start. It never blocks the breaker: should ch
// be full, the transition is dropped.
func transitionsTo(ch chan<- transition, start time.Time) resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type != resilience.EventTransition {
				return
			}
			select {
			case ch <- transition{At: time.Since(start), Client: src.Name, From: e.From, To: e.To, Reason: e.Reason}:
			default:
			}
		})
	})
}
