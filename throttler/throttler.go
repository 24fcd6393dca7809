package throttler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Config is a throttler's settings; the YAML keys of grpcmw's
// adaptiveThrottling section are in parentheses.
type Config struct {
	// Name names the throttler in its errors.
	Name string
	// Multiplier (multiplier) is K: the requests the backend may receive per
	// request it accepts before the throttler rejects any. At least 1;
	// default 2.
	Multiplier float64
	// Window (window) is how far back the throttler counts. Default 10s.
	Window time.Duration
	// MinimumRequests (minimumRequests): below this many requests in the
	// window the throttler rejects nothing. Default 20; 0 or more.
	MinimumRequests int
	// MaxRejectionRate (maxRejectionRate) caps the rejection probability, in
	// percent: at least 100 − MaxRejectionRate percent of the requests reach
	// the backend, however badly it does. In [0, 100); default 90.
	MaxRejectionRate float64
}

// DefaultConfig returns the defaults: multiplier 2, window 10s, minimum 20
// requests, at most 90 % rejected.
func DefaultConfig() Config {
	return Config{Multiplier: 2, Window: 10 * time.Second, MinimumRequests: 20, MaxRejectionRate: 90}
}

// Validate reports every setting out of range, each as a
// *resilience.OptionError that names its key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, v any, problem string) {
		errs = append(errs, &resilience.OptionError{Option: key, Value: v, Problem: problem})
	}
	if !(c.Multiplier >= 1 && c.Multiplier <= 1000) {
		bad("multiplier", c.Multiplier, "must be in [1, 1000]")
	}
	if c.Window < buckets*time.Millisecond || c.Window > time.Hour {
		bad("window", c.Window, "must be in [10ms, 1h]")
	}
	if c.MinimumRequests < 0 || c.MinimumRequests > 1_000_000 {
		bad("minimumRequests", c.MinimumRequests, "must be in [0, 1000000]")
	}
	if !(c.MaxRejectionRate >= 0 && c.MaxRejectionRate < 100) {
		bad("maxRejectionRate", c.MaxRejectionRate, "must be in [0, 100)")
	}
	return errors.Join(errs...)
}

// Verdict is what an admitted request's result says about the backend.
type Verdict uint8

const (
	// Accepted: the backend took the request and did its work (a business
	// error such as NOT_FOUND included).
	Accepted Verdict = iota
	// Refused: the backend shed it, failed or did not answer in time.
	Refused
	// Uncounted: the result says nothing (the caller gave up, a local
	// rejection inside the throttler); the request counts neither as a
	// request nor as an accept, as if it had never been made.
	Uncounted
)

// DefaultVerdict maps a result's outcome: Success is Accepted, Failure is
// Refused, Ignored is Uncounted.
func DefaultVerdict(r resilience.Result) Verdict {
	switch r.Outcome {
	case resilience.Success:
		return Accepted
	case resilience.Failure:
		return Refused
	}
	return Uncounted
}

// Option configures a [Throttler].
type Option func(*settings)

type settings struct {
	cfg       Config
	clock     resilience.Clock
	random    func() float64
	ownRandom bool // random is WithRandom's, not math/rand/v2's Float64
	verdict   func(resilience.Result) Verdict
	observer  resilience.Observer
}

// WithObserver sets the observer of the throttler's events: an
// resilience.EventAcquired for each request it admits and an
// resilience.EventRejection for each it rejects. Default none.
func WithObserver(o resilience.Observer) Option { return func(s *settings) { s.observer = o } }

// WithConfig sets the throttler's settings, every one of them (the name
// included: a [WithName] after it renames the throttler). Start c from
// [DefaultConfig]. Without it a throttler has [DefaultConfig]'s settings.
func WithConfig(c Config) Option { return func(s *settings) { s.cfg = c } }

// WithName names the throttler.
func WithName(name string) Option { return func(s *settings) { s.cfg.Name = name } }

// WithClock sets the clock the window reads (default
// resilience.SystemClock()).
func WithClock(c resilience.Clock) Option { return func(s *settings) { s.clock = c } }

// WithRandom sets the source of the draws in [0, 1) that decide each
// rejection (default math/rand/v2's Float64); for tests. The throttler
// calls f from one goroutine at a time.
func WithRandom(f func() float64) Option {
	return func(s *settings) { s.random, s.ownRandom = f, true }
}

// WithVerdict sets how an admitted request's result counts (default
// [DefaultVerdict]). grpcmw counts RESOURCE_EXHAUSTED as Refused too: a
// backend that sheds with it is overloaded, not answering.
func WithVerdict(f func(resilience.Result) Verdict) Option {
	return func(s *settings) { s.verdict = f }
}

// Throttler rejects requests locally while its backend refuses too many; see
// the package documentation. It is a resilience.Gate and is safe for
// concurrent use.
//
// Its counts take no lock: each slot of the window is a bucket of atomic
// counters, and a bucket is recycled for a newer slot by the first call that
// counts in that slot. What that costs in exactness is bounded and proved in
// the comment of bucket.add. Accepts are counted in one set of buckets per
// processor (up to 8), refusals and rejections in one shared set; a request
// reads the refusals first and sums the shards only when they could make
// its rejection probability above 0 (see rateAt): calls to a healthy
// backend on two cores share no cache line that either writes.
type Throttler struct {
	cfg      Config
	clock    resilience.Clock
	random   func() float64
	randMu   *sync.Mutex // serialises a WithRandom source; nil for math/rand/v2's
	verdict  func(resilience.Result) Verdict
	rec      resilience.Recorder
	rej      *RejectedError
	slot     time.Duration
	start    time.Time
	mask     int     // len(accepted)-1; len(accepted) is a power of two
	accepted []slots // accepts, a shard per processor

	_         [128]byte    // the counters below on cache lines of their own
	refusedAt atomic.Int64 // the latest slot a refusal was counted in
	shift     atomic.Int64 // slots the window moved on when the clock stepped back (rebase): read by every call
	newest    atomic.Int64 // the newest slot counted in: written once a slot
	_         [104]byte
	refused   slots // refusals and rejections
}

// New returns a throttler; an invalid setting is an error naming its key.
func New(opts ...Option) (*Throttler, error) {
	s := settings{cfg: DefaultConfig(), clock: resilience.SystemClock(), random: rand.Float64, verdict: DefaultVerdict}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if err := s.cfg.Validate(); err != nil {
		return nil, err
	}
	if s.clock == nil || s.random == nil || s.verdict == nil {
		return nil, errors.New("throttler: WithClock, WithRandom and WithVerdict need a non-nil argument")
	}
	t := &Throttler{cfg: s.cfg, clock: s.clock, random: s.random, verdict: s.verdict,
		rej: &RejectedError{Name: s.cfg.Name}, slot: s.cfg.Window / buckets, start: s.clock.Now()}
	if s.ownRandom {
		t.randMu = new(sync.Mutex)
	}
	n := shardCount()
	t.mask, t.accepted = n-1, make([]slots, n)
	for i := range t.accepted {
		t.accepted[i].init()
	}
	t.refused.init()
	t.refusedAt.Store(neverRefused)
	t.rec = resilience.Attach(s.observer, resilience.Source{Kind: resilience.KindThrottler, Name: s.cfg.Name})
	return t, nil
}

// Reset forgets every request and accept counted: the throttler starts
// afresh, as if just built. grpcmw resets it when the circuit breaker in
// front of it closes, its probes having shown the backend healthy.
func (t *Throttler) Reset() {
	for i := range t.accepted {
		t.accepted[i].reset()
	}
	t.refused.reset()
}

// Config returns the throttler's settings.
func (t *Throttler) Config() Config { return t.cfg }

// RejectionRate returns the probability with which the next request would
// be rejected, from 0 to maxRejectionRate/100.
func (t *Throttler) RejectionRate() float64 {
	return t.rateAt(t.epoch(t.clock.Now()))
}

// Counts returns the requests and the accepts counted in the current
// window. The requests are those rejected and those admitted that have
// ended Accepted or Refused; a request in flight is not among them yet, nor
// is its accept.
func (t *Throttler) Counts() (requests, accepts int64) {
	return t.totals(t.epoch(t.clock.Now()))
}

// draw returns a random number in [0, 1).
func (t *Throttler) draw() float64 {
	if t.randMu == nil {
		return t.random()
	}
	t.randMu.Lock()
	defer t.randMu.Unlock()
	return t.random()
}

// Execute runs fn through the throttler, classifying its error with
// resilience.DefaultClassifier.
func (t *Throttler) Execute(ctx context.Context, fn func(context.Context) error) (err error) {
	start := t.clock.Now() // the admission's time and the call's start
	ctx, p, err := t.EnterAt(ctx, start)
	if err != nil {
		return err
	}
	r := resilience.Result{Outcome: resilience.Failure, Err: resilience.ErrPanicked}
	defer func() {
		r.End = t.clock.Now()
		r.Duration = r.End.Sub(start)
		err = t.Exit(ctx, p, r)
	}()
	r.Err = fn(ctx)
	r.Outcome = resilience.DefaultClassifier(r.Err)
	return r.Err
}
