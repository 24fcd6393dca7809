// This file chooses the scenarios to run (-scenario), runs them one after
// the other, and writes the timeline of the whole run.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scenarios are the scenarios, in the order "all" runs them.
var scenarios = []struct{ Name, About string }{
	{"backend", "two clients, each calling its own backend, which gets overloaded, fails, hangs, then recovers (breaker, retries, bulkhead, timeouts)"},
	{"pods", "one bad pod among four behind round_robin, failing then slow (outlier ejection)"},
	{"cluster", "three client pods calling one dead dependency, alone then in cluster mode (breakers shared through Redis)"},
	{"events", "a consumer handling a broker's events through a backend that fails, then recovers (dead-letter queue and replay)"},
}

// scenarioOptions are the flags that are not the backend scenario's.
type scenarioOptions struct {
	Scenario string // "all", or names separated by commas
	SVG      string // where to write the timeline; "" for nowhere
	Pods     podsConfig
	Cluster  clusterConfig
	Events   eventsConfig
}

// defaultSVG is where the timeline goes unless -svg says otherwise: the
// working directory.
const defaultSVG = "chaos-timeline.svg"

// addScenarioFlags defines -scenario, -svg and the other scenarios' flags
// on fs, and returns the options they set and the names of the phase flags.
func addScenarioFlags(fs *flag.FlagSet, pods podsConfig, cl clusterConfig, ev eventsConfig) (*scenarioOptions, []string) {
	o := &scenarioOptions{Pods: pods, Cluster: cl, Events: ev}
	o.Events.Phases = slices.Clone(ev.Phases) // the flags set the options', not ev's
	var names []string
	for _, s := range scenarios {
		names = append(names, s.Name)
	}
	fs.StringVar(&o.Scenario, "scenario", "all", "the scenarios to run, separated by commas, or all of them in order: "+strings.Join(names, ", "))
	fs.StringVar(&o.SVG, "svg", defaultSVG, `write the run's timeline, a picture of each scenario per second, to this SVG file ("" for none)`)
	var flags []string
	for i := range o.Pods.Phases {
		p := &o.Pods.Phases[i]
		fs.DurationVar(&p.Duration, "pods-"+p.Name, p.Duration, "length of the pods scenario's "+p.Name+" phase")
		flags = append(flags, "-pods-"+p.Name)
	}
	fs.DurationVar(&o.Cluster.Run, "cluster-run", o.Cluster.Run, "length of each of the cluster scenario's two runs (alone, in cluster mode)")
	flags = append(flags, "-cluster-run")
	fs.StringVar(&o.Cluster.RedisAddr, "redis", "", `the cluster scenario's Redis, host:port ("": an embedded miniredis)`)
	for i := range o.Events.Phases {
		p := &o.Events.Phases[i]
		fs.DurationVar(&p.Duration, "events-"+p.Name, p.Duration, "length of the events scenario's "+p.Name+" phase")
		flags = append(flags, "-events-"+p.Name)
	}
	fs.IntVar(&o.Events.MaxEntries, "events-max-entries", 0, "the events scenario's dead-letter queue holds at most this many events (0: events.yaml's maxEntries); beyond, it refuses them and the consumer falls back on the broker's redeliveries")
	return o, flags
}

// setPhases makes every phase of the other scenarios d long, and the
// cluster scenario's runs.
func (o *scenarioOptions) setPhases(d time.Duration) {
	for i := range o.Pods.Phases {
		o.Pods.Phases[i].Duration = d
	}
	o.Cluster.Run = d
	for i := range o.Events.Phases {
		o.Events.Phases[i].Duration = d
	}
}

// parseScenarios returns the scenarios s names, in its order.
func parseScenarios(s string) ([]string, error) {
	var all []string
	for _, sc := range scenarios {
		all = append(all, sc.Name)
	}
	if s == "all" {
		return all, nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		switch {
		case !slices.Contains(all, n):
			return nil, fmt.Errorf("-scenario: no scenario %q (choose among %s, or all)", n, strings.Join(all, ", "))
		case slices.Contains(out, n):
			return nil, fmt.Errorf("-scenario: %q twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// backendAbout says what happens in each phase of the backend scenario,
// for the picture.
func backendAbout(cfg config) []string {
	var out []string
	for _, p := range cfg.Schedule {
		about := ""
		switch p.Behaviour {
		case overloaded:
			about = fmt.Sprintf("%s: %g× capacity", p.Name, cfg.Load)
		case failing:
			about = p.Name + ": " + cfg.unavailable()
		case hanging:
			about = p.Name + ": no answer"
		}
		out = append(out, about)
	}
	return out
}

// podsAbout says which pod is bad in each phase of the pods scenario, for
// the picture.
func podsAbout(cfg podsConfig) []string {
	var out []string
	for _, p := range cfg.Phases {
		about := ""
		switch {
		case p.Bad < 0:
		case p.Mode == podFailing:
			about = fmt.Sprintf("%s: pod-%d answers UNAVAILABLE", p.Name, p.Bad+1)
		case p.Mode == podSlow:
			about = fmt.Sprintf("%s: pod-%d takes %v a call", p.Name, p.Bad+1, cfg.Slow)
		}
		out = append(out, about)
	}
	return out
}

// eventsAbout says what the backend does in each phase of the events
// scenario, for the picture.
func eventsAbout(cfg eventsConfig) []string {
	var out []string
	for _, p := range cfg.Phases {
		about := ""
		if p.Behaviour == failing {
			about = p.Name + ": UNAVAILABLE"
		}
		out = append(out, about)
	}
	return out
}

// results are what the scenarios that ran found.
type results struct {
	Backend  *summary
	Pods     *podsSummary
	Cluster  *clusterSummary
	Events   *eventsSummary
	SVG      string    // the timeline's file, if written
	Timeline *timeline // nil unless written
}

// runScenarios runs the scenarios o names with cfg (the backend scenario's,
// whose rate, observer and quietness the others share), then writes the
// timeline. It stops early if ctx ends.
func runScenarios(ctx context.Context, cfg config, o scenarioOptions, w io.Writer) (results, error) {
	var res results
	names, err := parseScenarios(o.Scenario)
	if err != nil {
		return res, err
	}
	pods := o.Pods
	pods.Rate, pods.Observer, pods.Quiet = cfg.Rate, cfg.Observer, cfg.Quiet
	cl := o.Cluster
	cl.Observer, cl.Quiet = cfg.Observer, cfg.Quiet
	ev := o.Events
	ev.Rate, ev.Observer, ev.Quiet = cfg.Rate, cfg.Observer, cfg.Quiet
	var errs []error
	for _, n := range names {
		switch n {
		case "backend":
			errs = append(errs, cfg.validate())
		case "pods":
			errs = append(errs, pods.validate())
		case "cluster":
			errs = append(errs, cl.validate())
		case "events":
			errs = append(errs, ev.validate())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	var tl *timeline
	if o.SVG != "" {
		tl = newTimeline()
		res.Timeline = tl
	}
	for i, n := range names {
		if ctx.Err() != nil {
			break
		}
		if len(names) > 1 {
			fmt.Fprintf(w, "\n══ scenario %d/%d, %s: %s\n\n", i+1, len(names), n, scenarios[slices.IndexFunc(scenarios, func(s struct{ Name, About string }) bool { return s.Name == n })].About)
		}
		switch n {
		case "backend":
			k := tl.track(n, cfg.Schedule.total())
			cfg.Timeline = k
			sum, err := run(ctx, cfg, w)
			if err != nil {
				return res, err
			}
			res.Backend = &sum
			k.phases(sum.Schedule, backendAbout(cfg))
			k.transitions(sum.Transitions)
		case "pods":
			k := tl.track(n, pods.schedule().total())
			pods.Timeline = k
			sum, err := runPods(ctx, pods, w)
			if err != nil {
				return res, err
			}
			res.Pods = &sum
			k.phases(pods.schedule(), podsAbout(pods))
			for _, name := range sum.Pods {
				k.state(name, stateIn)
			}
			for _, e := range sum.Ejections {
				if e.Pod < 0 || e.Pod >= len(sum.Pods) {
					continue
				}
				state := stateEjected
				if e.Returned {
					state = stateIn
				}
				k.change(sum.Pods[e.Pod], stateIn, e.At, state)
			}
		case "cluster":
			k := tl.track(n, cl.Run)
			cl.Timeline = k
			sum, err := runCluster(ctx, cl, w)
			if err != nil {
				return res, err
			}
			res.Cluster = &sum
			for _, r := range sum.Runs {
				for _, p := range r.Pods {
					k.state(clusterRow(r.Name, p.Name), stateClosed)
				}
				for _, e := range r.Events {
					state := stateOpen
					if e.Remote {
						state = stateRemote
					}
					k.change(clusterRow(r.Name, podName(e.Pod)), stateClosed, e.At, state)
				}
			}
		case "events":
			sum, err := runEvents(ctx, ev, w)
			if err != nil {
				return res, err
			}
			res.Events = &sum
			sum.draw(tl.track(n, sum.Elapsed), eventsAbout(ev))
		}
	}
	if tl != nil {
		if err := tl.saveSVG(o.SVG); err != nil {
			return res, err
		}
		res.SVG = o.SVG
		where := o.SVG
		if abs, err := filepath.Abs(o.SVG); err == nil {
			where = abs
		}
		fmt.Fprintf(w, "\ntimeline: %s (open it in a browser)\n", where)
	}
	return res, nil
}
