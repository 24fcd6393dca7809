package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	meshconfig "github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// clientYAML configures the meshless client.
//
//go:embed client.yaml
var clientYAML string

// config is one run of the scenario.
type config struct {
	Schedule   schedule
	Rate       int           // calls per second, per client, outside the overloaded phase
	Load       float64       // the overloaded phase's calls per second, in multiples of what the backend serves
	Capacity   capacity      // each backend's
	Timeout    time.Duration // the bare client's deadline per call
	Client     *grpcmw.Config
	ClientYAML string // the meshless client's configuration, as printed
	Observer   resilience.Observer
	Quiet      bool       // print the summary only
	Listen     listenFunc // where the backends listen; nil: loopback TCP
	Timeline   *track     // records each call on the picture; nil: none
	Transport  string     // what the clients speak: "grpc" (the default) or "http"
}

// listen returns where the backends listen: Listen, or loopback TCP.
func (c config) listen() listenFunc {
	if c.Listen == nil {
		return listenTCP
	}
	return c.Listen
}

func defaultConfig() (config, error) {
	client, err := grpcmw.ParseConfig([]byte(clientYAML))
	if err != nil {
		return config{}, fmt.Errorf("client.yaml: %w", err)
	}
	return config{
		Schedule: schedule{
			{"healthy", healthy, 2 * time.Second},
			{"overloaded", overloaded, 3 * time.Second},
			{"failing", failing, 3 * time.Second},
			{"hanging", hanging, 4 * time.Second},
			{"recovered", healthy, 3 * time.Second},
		},
		Rate:       200,
		Load:       2.5,
		Capacity:   capacity{Workers: 8, Work: 20 * time.Millisecond, Queue: 16, Shed: shedUnavailable},
		Timeout:    500 * time.Millisecond,
		Client:     client,
		ClientYAML: clientYAML,
		Transport:  transportGRPC,
	}, nil
}

// rate is the calls per second, per client, during p.
func (c config) rate(p phase) float64 {
	if p.Behaviour == overloaded {
		return c.Load * c.Capacity.perSecond()
	}
	return float64(c.Rate)
}

// setTimeout makes d the bare client's deadline and the meshless client's
// per-attempt timeout, with an overall timeout of 2d.
func (c *config) setTimeout(d time.Duration) error {
	c.Timeout = d
	t := c.Client.Defaults.Timeout
	if t == nil {
		t = new(meshconfig.TimeoutSection)
		c.Client.Defaults.Timeout = t
	}
	t.PerAttempt, t.Overall = meshconfig.Dur(d), meshconfig.Dur(2*d)
	out, err := c.Client.Marshal()
	if err != nil {
		return err
	}
	c.ClientYAML = fmt.Sprintf("# client.yaml, with -timeout %v\n%s", d, out)
	return nil
}

func (c config) validate() error {
	var errs []error
	if c.Rate < 1 || c.Rate > 100_000 {
		errs = append(errs, fmt.Errorf("rate must be in [1, 100000] calls per second, got %d", c.Rate))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %v", c.Timeout))
	}
	if c.Load <= 0 || c.Load > 100 {
		errs = append(errs, fmt.Errorf("load must be in (0, 100] times what the backend serves, got %g", c.Load))
	}
	if c.Capacity.Workers < 1 || c.Capacity.Workers > 10_000 {
		errs = append(errs, fmt.Errorf("workers must be in [1, 10000], got %d", c.Capacity.Workers))
	}
	if c.Capacity.Work < time.Microsecond {
		errs = append(errs, fmt.Errorf("work must be 1µs or more, got %v", c.Capacity.Work))
	}
	if c.Capacity.Queue < 0 || c.Capacity.Queue > 100_000 {
		errs = append(errs, fmt.Errorf("queue must be in [0, 100000], got %d", c.Capacity.Queue))
	}
	if c.Capacity.FailEvery < 0 || c.Capacity.FailEvery == 1 {
		errs = append(errs, fmt.Errorf("fail-every must be 0 (none) or 2 or more, got %d", c.Capacity.FailEvery))
	}
	if c.Transport != transportGRPC && c.Transport != transportHTTP {
		errs = append(errs, fmt.Errorf("transport must be %q or %q, got %q", transportGRPC, transportHTTP, c.Transport))
	}
	if c.Capacity.Shed != shedUnavailable && c.Capacity.Shed != shedPushback {
		errs = append(errs, fmt.Errorf("shed must be %q or %q, got %q", shedUnavailable, shedPushback, c.Capacity.Shed))
	}
	if c.Capacity.Workers >= 1 && c.Capacity.Work >= time.Microsecond && c.Load > 0 && c.Load <= 100 &&
		c.rate(phase{Behaviour: overloaded}) > 100_000 {
		errs = append(errs, fmt.Errorf("the overloaded phase would make %.0f calls a second, over 100000: lower -load, -workers or raise -work",
			c.rate(phase{Behaviour: overloaded})))
	}
	for _, p := range c.Schedule {
		if p.Duration < 0 {
			errs = append(errs, fmt.Errorf("the %s phase must not be negative, got %v", p, p.Duration))
		}
	}
	if c.Schedule.total() <= 0 {
		errs = append(errs, errors.New("the phases must last some time"))
	}
	if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func main() {
	cfg, err := defaultConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	pods, err := defaultPodsConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	cl, err := defaultClusterConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	ev, err := defaultEventsConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: go run ./examples/chaos [flags]\n\n"+
			"Two gRPC clients make the same calls, one with a deadline alone, one through meshless, in each scenario:\n"+
			"  backend: each calls its own backend, which gets overloaded, fails, hangs, then recovers (client.yaml);\n"+
			"  pods:    both call four pods through round_robin; one fails, then another is slow (pods.yaml);\n"+
			"  cluster: three meshless client pods call a dead dependency, alone then in cluster mode (cluster.yaml);\n"+
			"  events:  two consumers handle a broker's events through a backend that fails for 3 s: bare's broker\n"+
			"           redelivers each failed event at once, 10 times, then gives up; meshless keeps it in a dead-letter\n"+
			"           queue (a bbolt file in a temporary directory the run removes) and replays it (events.yaml).\n"+
			"The phase flags without \"pods-\" or \"events-\" and the backend's flags (-fail-every, -load, -queue, -shed,\n"+
			"-timeout, -work, -workers) set the backend scenario; -rate sets the backend, pods and events scenarios (the\n"+
			"cluster scenario's pods call at 3, 1 and 1 calls a second); -phase and -quiet set every scenario.\n\n"+
			"It prints the breakers' transitions and a status line per second (not with -quiet), then per scenario a\n"+
			"summary that compares the clients phase by phase (docs/demo.md reads it), draws the run in an SVG\n"+
			"(-svg, chaos-timeline.svg in the working directory by default) and serves the meshless\n"+
			"clients' metrics on -metrics while it runs. With the default phases it runs about 47 s (backend\n"+
			"15 s, pods 12 s, cluster 10 s, events 8 s and the drain of its queue, which a disk's syncs pace:\n"+
			"47.0 s measured); -phase 1s makes it about 17 s. Flags:\n\n")
		flag.PrintDefaults()
	}
	var names []string
	for i := range cfg.Schedule {
		p := &cfg.Schedule[i]
		flag.DurationVar(&p.Duration, p.Name, p.Duration, "length of the "+p.Name+" phase")
		names = append(names, "-"+p.Name)
	}
	scen, podFlags := addScenarioFlags(flag.CommandLine, pods, cl, ev)
	names = append(names, podFlags...)
	flag.IntVar(&cfg.Rate, "rate", cfg.Rate, "calls per second, per client, outside the overloaded phase")
	flag.Float64Var(&cfg.Load, "load", cfg.Load, "calls per second in the overloaded phase, in multiples of what the backend serves (workers/work)")
	flag.IntVar(&cfg.Capacity.Workers, "workers", cfg.Capacity.Workers, "the backend's workers: calls served at once")
	flag.DurationVar(&cfg.Capacity.Work, "work", cfg.Capacity.Work, "the time a call takes one of the backend's workers")
	flag.IntVar(&cfg.Capacity.Queue, "queue", cfg.Capacity.Queue, "calls the backend queues for a worker; it sheds the calls beyond")
	flag.StringVar(&cfg.Capacity.Shed, "shed", cfg.Capacity.Shed, `how the backend sheds: "unavailable" (UNAVAILABLE) or "pushback" (RESOURCE_EXHAUSTED with a grpc-retry-pushback-ms trailer)`)
	flag.IntVar(&cfg.Capacity.FailEvery, "fail-every", 0, "make the backend fail one request in N it serves with UNAVAILABLE, in every phase (0: none)")
	timeout := flag.Duration("timeout", cfg.Timeout, "the bare client's deadline per call, and the meshless client's per-attempt timeout (its overall timeout is twice that)")
	flag.StringVar(&cfg.Transport, "transport", cfg.Transport, `what the backend scenario's clients and backends speak: "grpc" or "http" (net/http beside httpmw's RoundTripper, from the same client.yaml)`)
	flag.BoolVar(&cfg.Quiet, "quiet", false, "print the summary only")
	every := flag.Duration("phase", 0, "length of every phase, when set (overrides "+strings.Join(names, ", ")+")")
	metricsAddr := flag.String("metrics", "127.0.0.1:9464", `serve the meshless client's metrics at http://ADDR/metrics ("" for none)`)
	serve := flag.Bool("serve", false, "keep serving /metrics after the run, until interrupted")
	flag.Parse()
	if *every != 0 {
		for i := range cfg.Schedule {
			cfg.Schedule[i].Duration = *every
		}
		scen.setPhases(*every)
	}
	if *timeout != cfg.Timeout {
		if err := cfg.setTimeout(*timeout); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
	}
	if err := mainErr(cfg, *scen, *metricsAddr, *serve); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func mainErr(cfg config, scen scenarioOptions, metricsAddr string, serve bool) error {
	// Ctrl-C ends the run early; the summary covers what ran.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if serve && metricsAddr == "" {
		return errors.New(`-serve keeps serving /metrics: it needs a -metrics address, not ""`)
	}
	if metricsAddr != "" {
		m, err := serveMetrics(metricsAddr)
		if err != nil {
			return fmt.Errorf("%w (choose another address with -metrics, or -metrics \"\" for none)", err)
		}
		defer m.Close()
		cfg.Observer, scen.Cluster.Cluster, scen.Events.DeadLetter = m.Observer, m.Cluster, m.DeadLetter
		fmt.Printf("metrics: http://%s/metrics\n", m.Addr)
	}
	if _, err := runScenarios(ctx, cfg, scen, os.Stdout); err != nil {
		return err
	}
	if serve && ctx.Err() == nil {
		fmt.Println("\nstill serving /metrics; Ctrl-C to stop")
		<-ctx.Done()
	}
	return nil
}

// run plays the scenario, tells it on w (unless cfg.Quiet), prints the
// summary on w and returns it. It returns once every call has finished and
// the backends have stopped, early if ctx ends.
func run(ctx context.Context, cfg config, w io.Writer) (summary, error) {
	if err := cfg.validate(); err != nil {
		return summary{}, err
	}
	start := time.Now()
	cfg.Timeline.begin(start)
	if cfg.Timeline != nil {
		cfg.Timeline.transport = cfg.Transport // read only once the run is over
	}
	events := make(chan transition, 64)
	clients, err := newClients(cfg, resilience.Observers(cfg.Observer, transitionsTo(events, start)))
	if err != nil {
		return summary{}, err
	}
	defer closeClients(clients)
	for _, c := range clients {
		c.series = cfg.Timeline.series(c.name)
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
	fastest := 0.0
	for _, p := range cfg.Schedule {
		fastest = max(fastest, cfg.rate(p))
	}
	tick := time.NewTicker(max(time.Duration(float64(time.Second)/fastest), time.Millisecond))
	defer tick.Stop()
	cur, started, startedBefore := -1, int64(0), int64(0) // startedBefore: calls started before phase cur
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
			cur, startedBefore = p, started
			for _, c := range clients {
				c.backend.set(sched[p].Behaviour)
			}
			s.phase(el, p)
		}
		due := startedBefore + int64((el-sched.start(p)).Seconds()*cfg.rate(sched[p]))
		for ; started < due; started++ {
			req := request(started)
			for _, c := range clients {
				c.st.begin(p)
				wg.Go(func() { c.call(ctx, p, req) })
			}
		}
		select {
		case <-ctx.Done():
		case tr := <-events:
			s.transition(tr)
		case <-tick.C:
		}
	}

	// The calls still in flight end by their deadlines at the latest.
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
		if src.Kind != resilience.KindCircuitBreaker {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type != resilience.EventTransition {
				return
			}
			select {
			case ch <- transition{At: time.Since(start), Client: "meshless", Breaker: src.Name, From: e.From, To: e.To, Reason: e.Reason}:
			default:
			}
		})
	})
}
