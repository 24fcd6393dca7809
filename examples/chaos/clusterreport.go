// This file tells the cluster scenario: its running log and its summary.

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// dependencyKey is the pods' breaker key: the service they call.
const dependencyKey = "grpc.testing.TestService"

// clusterStory writes the cluster scenario's running log.
type clusterStory struct {
	w    io.Writer
	cfg  clusterConfig
	seen int // events already told of
}

func (s *clusterStory) header(redisAbout, dep string) {
	var rates []string
	for i, r := range s.cfg.Rates {
		rates = append(rates, fmt.Sprintf("%s %d/s", podName(i), r))
	}
	fmt.Fprintf(s.w, "cluster: %d client pods, each its own grpcmw chain from cluster.yaml and its own gRPC connection, call one\n"+
		"dependency (%s) that is dead: it answers every request UNAVAILABLE. Each pod calls at a few calls a second\n"+
		"(%s), %v, twice: alone, then in cluster mode through %s.\n"+
		"The breaker needs %d calls to decide; in cluster mode the pods sync every %v, a third of it apart.\n\n",
		len(s.cfg.Rates), dep, strings.Join(rates, ", "), s.cfg.Run, redisAbout, s.cfg.minimumCalls(), s.cfg.syncInterval())
	fmt.Fprintln(s.w, "  "+strings.ReplaceAll(strings.TrimSpace(s.cfg.ClientYAML), "\n", "\n  "))
	fmt.Fprintln(s.w)
}

func (s *clusterStory) run(run int) {
	s.seen = 0
	what := "alone: no cluster section, each pod's breaker decides on its own calls"
	if run == modeCluster {
		what = "in cluster mode: the pods share their windows and opens through Redis"
	}
	fmt.Fprintf(s.w, "▶ run %d/%d, %s\n", run+1, len(clusterRuns), what)
	fmt.Fprintf(s.w, "%9s", "time")
	for i := range s.cfg.Rates {
		fmt.Fprintf(s.w, "  %-22s", "pod "+podName(i)+": reached/rejected")
	}
	fmt.Fprintln(s.w)
}

// watch prints, every second until d from start, each pod's calls so far
// (that reached the dependency, that were rejected at once) and the
// breaker events since the line before.
func (s *clusterStory) watch(ctx context.Context, start time.Time, d time.Duration, pods []*clusterPod, ev *events) {
	for next := time.Second; ; next += time.Second {
		end := next >= d
		if end {
			next = d
		}
		if sleep(ctx, time.Until(start.Add(next))) != nil {
			return
		}
		ev.mu.Lock()
		fresh := append([]breakerEvent(nil), ev.list[s.seen:]...)
		s.seen = len(ev.list)
		ev.mu.Unlock()
		for _, e := range fresh {
			fmt.Fprintf(s.w, "%8.3fs  %s\n", e.At.Seconds(), describeOpen(e))
		}
		fmt.Fprintf(s.w, "%8.3fs", next.Seconds())
		for _, p := range pods {
			state := "-"
			if b, ok := p.chain.Breaker(dependencyKey); ok {
				state = b.State().String()
			}
			fmt.Fprintf(s.w, "  %-22s", fmt.Sprintf("%d/%d %s", p.outcomes[outReached].Load(), p.outcomes[outRejected].Load(), state))
		}
		fmt.Fprintln(s.w)
		if end {
			return
		}
	}
}

func describeOpen(e breakerEvent) string {
	if e.Remote {
		return fmt.Sprintf("⊘ pod %s's breaker opens: another pod's open, through Redis", podName(e.Pod))
	}
	return fmt.Sprintf("⊘ pod %s's breaker opens", podName(e.Pod))
}

func (s *clusterStory) done(r clusterResult) {
	fmt.Fprintf(s.w, "  %s: %d requests reached the dead dependency (%s)\n\n", r.Name, r.Reached(), r.perPod())
}

// clusterPodResult is one pod's calls in one run.
type clusterPodResult struct {
	Name          string
	Rate          int
	Reached       int           // requests the dependency received from the pod
	Failed        int           // calls that ended UNAVAILABLE: the dependency's answer
	Rejected      int           // calls rejected at once with CIRCUIT_OPEN
	OK, Other     int           // none expected
	FirstRejected time.Duration // since the run's start; -1 if none
}

func (p clusterPodResult) Calls() int { return p.Failed + p.Rejected + p.OK + p.Other }

// clusterResult is one run.
type clusterResult struct {
	Name    string
	Pods    []clusterPodResult
	Events  []breakerEvent
	Start   time.Time
	Elapsed time.Duration
}

// Reached is the requests that reached the dead dependency, every pod's.
func (r clusterResult) Reached() int {
	n := 0
	for _, p := range r.Pods {
		n += p.Reached
	}
	return n
}

func (r clusterResult) perPod() string {
	var out []string
	for _, p := range r.Pods {
		out = append(out, fmt.Sprintf("%s %d", p.Name, p.Reached))
	}
	return strings.Join(out, ", ")
}

// FirstOpen is the first breaker that opened by itself, or ok false.
func (r clusterResult) FirstOpen() (breakerEvent, bool) {
	for _, e := range r.Events {
		if !e.Remote {
			return e, true
		}
	}
	return breakerEvent{}, false
}

// OpenedAt is when pod i's breaker first opened, and whether it was
// another pod's open; ok false if it did not.
func (r clusterResult) OpenedAt(i int) (at time.Duration, remote, ok bool) {
	for _, e := range r.Events {
		if e.Pod == i {
			return e.At, e.Remote, true
		}
	}
	return 0, false, false
}

// clusterSummary is what the cluster scenario found.
type clusterSummary struct {
	Pods         int
	MinimumCalls int
	SyncInterval time.Duration
	Redis        string
	Runs         []clusterResult // alone, cluster
	Interrupted  bool
}

func (s clusterSummary) print(w io.Writer) {
	ran := ""
	if s.Interrupted {
		ran = " (interrupted)"
	}
	fmt.Fprintf(w, "\nsummary (cluster)%s: %d pods call a dead dependency; the breaker needs %d calls to decide\n", ran, s.Pods, s.MinimumCalls)
	fmt.Fprintf(w, "  %-40s", "")
	for _, r := range s.Runs {
		fmt.Fprintf(w, "%22s", r.Name)
	}
	fmt.Fprintln(w)
	row := func(label string, cell func(r clusterResult) string) {
		fmt.Fprintf(w, "  %-40s", label)
		for _, r := range s.Runs {
			fmt.Fprintf(w, "%22s", cell(r))
		}
		fmt.Fprintln(w)
	}
	row("requests that reached the dead dependency", func(r clusterResult) string { return fmt.Sprint(r.Reached()) })
	for i := range s.Pods {
		row(fmt.Sprintf("  from pod %s", podName(i)), func(r clusterResult) string {
			if i >= len(r.Pods) {
				return "-"
			}
			p := r.Pods[i]
			return fmt.Sprintf("%d of %d calls", p.Reached, p.Calls())
		})
	}
	row("calls rejected at once (CIRCUIT_OPEN)", func(r clusterResult) string {
		n := 0
		for _, p := range r.Pods {
			n += p.Rejected
		}
		return fmt.Sprint(n)
	})
	row("calls that succeeded", func(r clusterResult) string {
		n := 0
		for _, p := range r.Pods {
			n += p.OK
		}
		return fmt.Sprint(n)
	})
	for i := range s.Pods {
		row(fmt.Sprintf("pod %s's breaker opened", podName(i)), func(r clusterResult) string {
			at, remote, ok := r.OpenedAt(i)
			switch {
			case !ok:
				return "never"
			case remote:
				return fmt.Sprintf("at %.2fs, remote", at.Seconds())
			}
			return fmt.Sprintf("at %.2fs", at.Seconds())
		})
	}
	if len(s.Runs) == 2 {
		a, c := s.Runs[modeAlone].Reached(), s.Runs[modeCluster].Reached()
		if a > 0 {
			fmt.Fprintf(w, "  in cluster mode, %d requests reached the dead dependency instead of %d: %d fewer (%.0f%%)\n", c, a, a-c, 100*float64(a-c)/float64(a))
		}
	}
}
