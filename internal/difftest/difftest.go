package difftest

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Events returns, sorted, the events obs received (but those whose
// source's name, up to its first "/", is in skip), each as one line of
// every field a differential compares, and forgets them.
func Events(obs *resiliencetest.Observer, skip map[string]bool) []string {
	var out []string
	for _, r := range obs.Recorded() {
		if s, _, _ := strings.Cut(r.Source.Name, "/"); skip[s] {
			continue
		}
		e := r.Event
		out = append(out, fmt.Sprintf("%v/%s %s: %v %v %v timedOut %v attempt %d backoff %v winner %d slow %v %v→%v %v",
			r.Source.Kind, r.Source.Scope, r.Source.Name, e.Type, e.Outcome, e.Duration, e.TimedOut, e.Attempt, e.Backoff, e.Winner, e.Slow, e.From, e.To, e.State))
	}
	obs.Reset()
	slices.Sort(out)
	return out
}

// Burst makes n calls of one at once (one when n < 2) and joins their
// descriptions, sorted: the order the calls end in is not the test's.
func Burst(n int, one func() string) string {
	if n < 2 {
		return one()
	}
	out := make([]string, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = one() })
	}
	wg.Wait()
	slices.Sort(out)
	return strings.Join(out, "; ")
}
