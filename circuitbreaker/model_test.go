package circuitbreaker_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

var (
	modelSeed      = flag.Uint64("model.seed", 0, "seed of TestModel (0: a new one each run)")
	modelSequences = flag.Int("model.sequences", 10000, "random sequences TestModel runs")
)

// TestModel runs random sequences of acquires, results, clock advances and
// manual transitions against a breaker and against refModel, a plain
// reference written from Resilience4j's rules, and compares them after every
// step.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *modelSequences
	if testing.Short() {
		n = 1000
	}
	for i := range n {
		s := seed + uint64(i)
		if msg := runModelSequence(s); msg != "" {
			t.Fatalf("sequence with seed %d (rerun: go test -run TestModel -model.seed=%d -model.sequences=1):\n%s", s, s, msg)
		}
	}
}

type modelConfig struct {
	timeBased                  bool
	size, minCalls             int
	failureRate, slowRate      float64
	slowThreshold              time.Duration
	wait, maxWait, halfOpenMax time.Duration
	permits                    int
	mode                       circuitbreaker.Mode
}

func randomConfig(r *rand.Rand) modelConfig {
	c := modelConfig{
		timeBased:     r.IntN(3) == 0,
		size:          1 + r.IntN(8),
		failureRate:   []float64{20, 50, 60, 100}[r.IntN(4)],
		slowRate:      []float64{30, 50, 100}[r.IntN(3)],
		slowThreshold: time.Second,
		wait:          time.Duration(2+r.IntN(8)) * time.Second,
		permits:       1 + r.IntN(3),
	}
	if c.timeBased {
		c.minCalls = 1 + r.IntN(12)
	} else {
		c.minCalls = 1 + r.IntN(c.size)
	}
	if r.IntN(2) == 0 {
		c.maxWait = c.wait * time.Duration(1+r.IntN(5))
	}
	if r.IntN(3) == 0 {
		c.halfOpenMax = time.Duration(1+r.IntN(6)) * time.Second
	}
	if r.IntN(10) == 0 {
		c.mode = circuitbreaker.Mode(1 + r.IntN(3))
	}
	return c
}

func (c modelConfig) options(clk resilience.Clock) []circuitbreaker.Option {
	wt := circuitbreaker.CountBased
	if c.timeBased {
		wt = circuitbreaker.TimeBased
	}
	return []circuitbreaker.Option{
		circuitbreaker.WithClock(clk),
		circuitbreaker.WithConfig(breakerConf(func(cc *circuitbreaker.Config) {
			cc.SlidingWindowType = wt
			cc.SlidingWindowSize = c.size
			cc.MinimumNumberOfCalls = c.minCalls
			cc.FailureRateThreshold = c.failureRate
			cc.SlowCallRateThreshold = c.slowRate
			cc.SlowCallDurationThreshold = c.slowThreshold
			cc.WaitDurationInOpenState = c.wait
			cc.MaxWaitDurationInOpenState = c.maxWait
			cc.MaxWaitDurationInHalfOpenState = c.halfOpenMax
			cc.PermittedNumberOfCallsInHalfOpenState = c.permits
			cc.Mode = c.mode
		})),
	}
}

// refModel is the reference: slices and loops, no cleverness.
type refModel struct {
	c       modelConfig
	now     time.Time
	state   circuitbreaker.State
	period  int // incremented at every transition
	reopens int

	window    []rec // CLOSED / METRICS_ONLY
	probes    []rec // HALF_OPEN
	frozen    []rec // OPEN: what tripped it
	frozenMin int

	permits      int
	openUntil    time.Time
	halfOpenEnds time.Time // zero: no max wait
	notPermitted int64
}

type rec struct {
	at           time.Time
	failed, slow bool
}

type modelPermit struct {
	period int
	start  time.Time
	probe  bool
}

func newRefModel(c modelConfig, now time.Time) *refModel {
	m := &refModel{c: c, now: now}
	switch c.mode {
	case circuitbreaker.ModeDisabled:
		m.state = circuitbreaker.StateDisabled
	case circuitbreaker.ModeMetricsOnly:
		m.state = circuitbreaker.StateMetricsOnly
	case circuitbreaker.ModeForcedOpen:
		m.state = circuitbreaker.StateForcedOpen
	default:
		m.state = circuitbreaker.StateClosed
	}
	return m
}

// live returns the records that are in the window at the model's time.
func (m *refModel) live() []rec {
	if !m.c.timeBased {
		if len(m.window) > m.c.size {
			return m.window[len(m.window)-m.c.size:]
		}
		return m.window
	}
	var out []rec
	for _, r := range m.window {
		if r.at.Unix() > m.now.Unix()-int64(m.c.size) {
			out = append(out, r)
		}
	}
	return out
}

func rates(rs []rec) (calls, failed, slow, slowFailed int) {
	for _, r := range rs {
		calls++
		if r.failed {
			failed++
		}
		if r.slow {
			slow++
			if r.failed {
				slowFailed++
			}
		}
	}
	return
}

// over applies the thresholds; it returns the reason, or "".
func (m *refModel) over(rs []rec, min int) circuitbreaker.Reason {
	calls, failed, slow, _ := rates(rs)
	if calls == 0 || calls < min {
		return circuitbreaker.ReasonNone
	}
	if float64(failed)*100/float64(calls) >= m.c.failureRate {
		return circuitbreaker.ReasonFailureRate
	}
	if float64(slow)*100/float64(calls) >= m.c.slowRate {
		return circuitbreaker.ReasonSlowCallRate
	}
	return circuitbreaker.ReasonNone
}

func (m *refModel) openWait() time.Duration {
	w := m.c.wait
	if m.c.maxWait > 0 {
		for range m.reopens {
			w *= 2
			if w >= m.c.maxWait {
				w = m.c.maxWait
				break
			}
		}
	}
	return w
}

func (m *refModel) enter(s circuitbreaker.State, reopens int) {
	prev := m.state
	prevRecs, prevMin := m.live(), m.c.minCalls
	if prev == circuitbreaker.StateHalfOpen {
		prevRecs, prevMin = m.probes, m.c.permits
	}
	m.state, m.reopens = s, reopens
	m.period++
	m.window, m.probes, m.frozen, m.notPermitted = nil, nil, nil, 0
	switch s {
	case circuitbreaker.StateOpen:
		m.frozen, m.frozenMin = append([]rec(nil), prevRecs...), prevMin
		m.openUntil = m.now.Add(m.openWait())
	case circuitbreaker.StateHalfOpen:
		m.permits = m.c.permits
		m.halfOpenEnds = time.Time{}
		if m.c.halfOpenMax > 0 {
			m.halfOpenEnds = m.now.Add(m.c.halfOpenMax)
		}
	}
}

// advance moves time on, firing the state timers that fall due on the way.
func (m *refModel) advance(d time.Duration) {
	end := m.now.Add(d)
	for {
		switch {
		case m.state == circuitbreaker.StateOpen && !m.openUntil.After(end):
			m.now = m.openUntil
			m.enter(circuitbreaker.StateHalfOpen, m.reopens)
			continue
		case m.state == circuitbreaker.StateHalfOpen && !m.halfOpenEnds.IsZero() && !m.halfOpenEnds.After(end):
			m.now = m.halfOpenEnds
			m.enter(circuitbreaker.StateOpen, m.reopens+1)
			continue
		}
		break
	}
	m.now = end
}

func (m *refModel) acquire() (modelPermit, bool) {
	switch m.state {
	case circuitbreaker.StateClosed, circuitbreaker.StateMetricsOnly, circuitbreaker.StateDisabled:
		return modelPermit{period: m.period, start: m.now}, true
	case circuitbreaker.StateHalfOpen:
		if m.permits > 0 {
			m.permits--
			return modelPermit{period: m.period, start: m.now, probe: true}, true
		}
	}
	m.notPermitted++
	return modelPermit{}, false
}

func (m *refModel) finish(p modelPermit, o resilience.Outcome) {
	if p.period != m.period || m.state == circuitbreaker.StateDisabled {
		return
	}
	r := rec{at: m.now, failed: o == resilience.Failure, slow: m.now.Sub(p.start) > m.c.slowThreshold}
	if p.probe {
		if o == resilience.Ignored {
			m.permits++
			return
		}
		m.probes = append(m.probes, r)
		if len(m.probes) < m.c.permits {
			return
		}
		if reason := m.over(m.probes, m.c.permits); reason != circuitbreaker.ReasonNone {
			m.enter(circuitbreaker.StateOpen, m.reopens+1)
		} else {
			m.enter(circuitbreaker.StateClosed, 0)
		}
		return
	}
	if o == resilience.Ignored {
		return
	}
	m.window = append(m.window, r)
	if m.state == circuitbreaker.StateClosed && m.over(m.live(), m.c.minCalls) != circuitbreaker.ReasonNone {
		m.enter(circuitbreaker.StateOpen, 0)
	}
}

func (m *refModel) manual(s circuitbreaker.State) {
	if m.state != s || s == circuitbreaker.StateClosed {
		m.enter(s, 0)
	}
}

func (m *refModel) metrics() circuitbreaker.Metrics {
	var rs []rec
	min := m.c.minCalls
	switch m.state {
	case circuitbreaker.StateClosed, circuitbreaker.StateMetricsOnly:
		rs = m.live()
	case circuitbreaker.StateHalfOpen:
		rs, min = m.probes, m.c.permits
	case circuitbreaker.StateOpen:
		rs, min = m.frozen, m.frozenMin
	}
	calls, failed, slow, slowFailed := rates(rs)
	out := circuitbreaker.Metrics{
		State: m.state, FailureRate: -1, SlowCallRate: -1,
		Calls: int64(calls), SuccessfulCalls: int64(calls - failed), FailedCalls: int64(failed),
		SlowCalls: int64(slow), SlowSuccessfulCalls: int64(slow - slowFailed), SlowFailedCalls: int64(slowFailed),
		NotPermittedCalls: m.notPermitted,
	}
	if calls > 0 && calls >= min {
		out.FailureRate = float64(failed) * 100 / float64(calls)
		out.SlowCallRate = float64(slow) * 100 / float64(calls)
	}
	return out
}

// runModelSequence returns "" or the trace of a divergence.
func runModelSequence(seed uint64) string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cfg := randomConfig(r)
	clk := resiliencetest.NewClock(t0)
	cb, err := circuitbreaker.New(cfg.options(clk)...)
	if err != nil {
		return fmt.Sprintf("config %+v refused: %v", cfg, err)
	}
	ref := newRefModel(cfg, t0)

	type held struct {
		real  permit
		model modelPermit
	}
	var permits []held
	var trace strings.Builder
	fmt.Fprintf(&trace, "config %+v\n", cfg)
	outcomes := []resilience.Outcome{resilience.Success, resilience.Success, resilience.Failure, resilience.Failure, resilience.Ignored}
	durations := []time.Duration{0, 300 * time.Millisecond, time.Second, 1500 * time.Millisecond, 3 * time.Second, 11 * time.Second}

	steps := 20 + r.IntN(60)
	for step := range steps {
		switch op := r.IntN(100); {
		case op < 45: // acquire
			p, err := enter(cb, clk, context.Background())
			mp, admitted := ref.acquire()
			fmt.Fprintf(&trace, "%3d acquire: real err=%v, model admitted=%v\n", step, err, admitted)
			if (err == nil) != admitted {
				return trace.String() + "DIVERGED: admission"
			}
			if admitted && len(permits) < 6 {
				permits = append(permits, held{p, mp})
			}
		case op < 85 && len(permits) > 0: // finish a held call
			i := r.IntN(len(permits))
			o := outcomes[r.IntN(len(outcomes))]
			permits[i].real.Record(o)
			ref.finish(permits[i].model, o)
			fmt.Fprintf(&trace, "%3d finish #%d started %v ago: %v\n", step, i, ref.now.Sub(permits[i].model.start), o)
			permits = append(permits[:i], permits[i+1:]...)
		case op < 97: // time passes
			d := durations[r.IntN(len(durations))]
			clk.Advance(d)
			ref.advance(d)
			fmt.Fprintf(&trace, "%3d advance %v\n", step, d)
		default: // an operator steps in
			ops := []struct {
				name string
				f    func()
				s    circuitbreaker.State
			}{
				{"Reset", cb.Reset, circuitbreaker.StateClosed},
				{"ForceOpen", cb.ForceOpen, circuitbreaker.StateForcedOpen},
				{"Disable", cb.Disable, circuitbreaker.StateDisabled},
				{"MetricsOnly", cb.MetricsOnly, circuitbreaker.StateMetricsOnly},
			}
			o := ops[r.IntN(len(ops))]
			o.f()
			ref.manual(o.s)
			fmt.Fprintf(&trace, "%3d %s\n", step, o.name)
		}
		if got, want := cb.Metrics(), ref.metrics(); got != want || cb.State() != ref.state {
			return fmt.Sprintf("%s    real %+v\n    want %+v\nDIVERGED: state or metrics", trace.String(), got, want)
		}
	}
	return ""
}
