package outlier

import (
	"math"
	"time"
)

// The reasons an endpoint is ejected, as [Listener.Ejected] receives them and
// the meshless.outlier.reason metric attribute spells them.
const (
	ReasonConsecutiveFailures = "consecutive_failures"
	ReasonFailurePercentage   = "failure_percentage"
	ReasonSuccessRate         = "success_rate"
	ReasonSlowCalls           = "slow_calls"
)

// sample is one endpoint's calls in the interval that just ended.
type sample struct {
	success, failure int64 // calls by result (ignored calls are neither)
	slow             int64 // of those, calls slower than the slow-call threshold
	ejected          bool  // ejected before this evaluation
}

func (s sample) volume() int64 { return s.success + s.failure }

// verdict says that endpoint i is to be ejected for reason.
type verdict struct {
	i      int
	reason string
}

// maxEjected is how many of n endpoints may be ejected at once: pct percent,
// rounded down, and never all of them.
func maxEjected(n, pct int) int {
	m := n * pct / 100
	if m > n-1 {
		m = n - 1
	}
	return max(m, 0)
}

// detect runs the interval detectors (success rate, then failure percentage,
// then slow calls, as in gRFC A50 with slow calls added) over the samples,
// and returns the endpoints to eject, never letting more than maxEjected of
// hosts (the resolver's endpoints, which may have several addresses each)
// be ejected in all.
func detect(c *Config, s []sample, hosts int) []verdict {
	ejected := 0
	for _, x := range s {
		if x.ejected {
			ejected++
		}
	}
	limit := maxEjected(hosts, c.MaxEjectionPercent)
	if ejected >= limit {
		return nil
	}
	var out []verdict
	taken := make([]bool, len(s))
	eject := func(i int, reason string) bool {
		if ejected >= limit {
			return false
		}
		out = append(out, verdict{i, reason})
		taken[i] = true
		ejected++
		return true
	}
	// candidates returns the endpoints not ejected before this evaluation
	// with at least volume calls. One that an earlier detector has just
	// ejected is among them, as in Envoy and gRFC A50: it was judged on
	// this interval's calls and counts toward minimumHosts; it is not
	// ejected twice.
	candidates := func(volume int) []int {
		var idx []int
		for i, x := range s {
			if !x.ejected && x.volume() >= int64(volume) && x.volume() > 0 {
				idx = append(idx, i)
			}
		}
		return idx
	}
	if sr := c.SuccessRate; !sr.Disabled {
		if idx := candidates(sr.RequestVolume); len(idx) >= sr.MinimumHosts && len(idx) > 0 {
			rates := make([]float64, len(idx))
			for k, i := range idx {
				rates[k] = float64(s[i].success) / float64(s[i].volume())
			}
			threshold := successRateThreshold(rates, sr.StdevFactor)
			for k, i := range idx {
				if rates[k] < threshold && !eject(i, ReasonSuccessRate) {
					return out
				}
			}
		}
	}
	if fp := c.FailurePercentage; !fp.Disabled {
		if idx := candidates(fp.RequestVolume); len(idx) >= fp.MinimumHosts && len(idx) > 0 {
			for _, i := range idx {
				if !taken[i] && 100*s[i].failure >= int64(fp.Threshold)*s[i].volume() && s[i].failure > 0 &&
					!eject(i, ReasonFailurePercentage) {
					return out
				}
			}
		}
	}
	if sc := c.SlowCalls; !sc.Disabled {
		for _, i := range candidates(sc.RequestVolume) {
			if !taken[i] && 100*s[i].slow >= int64(sc.RateThreshold)*s[i].volume() && s[i].slow > 0 &&
				!eject(i, ReasonSlowCalls) {
				return out
			}
		}
	}
	return out
}

// successRateThreshold is mean - factor × stdev of the rates (population
// standard deviation), as Envoy and gRFC A50 compute it.
func successRateThreshold(rates []float64, factor float64) float64 {
	var sum float64
	for _, r := range rates {
		sum += r
	}
	mean := sum / float64(len(rates))
	var sq float64
	for _, r := range rates {
		sq += (r - mean) * (r - mean)
	}
	stdev := math.Sqrt(sq / float64(len(rates)))
	return mean - factor*stdev
}

// ejectionTime is how long an endpoint ejected for the multiplier-th time
// in a row stays out: base × multiplier, capped at max(base, maxTime).
func ejectionTime(base, maxTime time.Duration, multiplier int) time.Duration {
	limit := max(base, maxTime)
	if multiplier <= 0 {
		multiplier = 1
	}
	if base > 0 && time.Duration(multiplier) > limit/base {
		return limit
	}
	return min(base*time.Duration(multiplier), limit)
}
