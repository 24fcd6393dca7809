package throttler

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/resilience"
)

// buckets is how many parts the window is cut into: it slides by a tenth.
const buckets = 10

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

// bucket counts the verdicts of one slot of the window (a tenth of it).
// epoch is the slot's index since the throttler started, or empty (-1) or
// resetting (being recycled for a newer slot). counts holds the requests in
// its high 32 bits and the accepts in its low 32 bits, so that a verdict is
// one atomic add and a reader sees both at once: exact up to 2³²−1 verdicts
// a slot (4.3 billion per tenth of the window; a window is at most an hour).
type bucket struct {
	epoch  atomic.Int64
	counts atomic.Uint64
}

const (
	oneRequest = 1 << 32
	oneAccept  = 1
)

const (
	empty     = -1
	resetting = -2
)

// Throttler rejects requests locally while its backend refuses too many; see
// the package documentation. It is a resilience.Gate and is safe for
// concurrent use.
//
// Its counts take no lock: each slot of the window is a bucket of atomic
// counters, and a bucket is recycled for a newer slot by the first call that
// counts in that slot. What that costs in exactness is bounded and proved in
// the comment of [Throttler.count].
type Throttler struct {
	cfg     Config
	clock   resilience.Clock
	random  func() float64
	randMu  *sync.Mutex // serialises a WithRandom source; nil for math/rand/v2's
	verdict func(resilience.Result) Verdict
	rec     resilience.Recorder
	rej     *RejectedError
	slot    time.Duration
	start   time.Time

	_ [64]byte // the buckets, written by every call, on cache lines of their own
	b [buckets]bucket
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
	for i := range t.b {
		t.b[i].epoch.Store(empty)
	}
	t.rec = resilience.Attach(s.observer, resilience.Source{Kind: resilience.KindThrottler, Name: s.cfg.Name})
	return t, nil
}

// Reset forgets every request and accept counted: the throttler starts
// afresh, as if just built. grpcmw resets it when the circuit breaker in
// front of it closes, its probes having shown the backend healthy.
func (t *Throttler) Reset() {
	for i := range t.b {
		b := &t.b[i]
		b.epoch.Store(resetting)
		b.counts.Store(0)
		b.epoch.Store(empty)
	}
}

// Config returns the throttler's settings.
func (t *Throttler) Config() Config { return t.cfg }

// epoch returns the index, since the throttler started, of the window slot
// that holds at.
func (t *Throttler) epoch(at time.Time) int64 {
	return max(int64(at.Sub(t.start)/t.slot), 0)
}

// count counts requests and accepts in the bucket of slot e, recycling it
// if it holds an older slot; it counts nothing if the bucket holds a newer
// one (e is then a window or more before a verdict already counted, out of
// every window to come), as the slot's own counts would already have gone.
//
// Without a lock, what can go wrong is bounded, and only at a rollover:
//
//   - A bucket is recycled in three steps: its epoch is swapped from the old
//     slot to resetting (a compare-and-swap: one caller wins), its counts
//     are zeroed, and the new slot is published. A count that meets
//     resetting waits (yielding) until the slot is published and tries
//     again, so that no count of the new slot is zeroed with the old ones,
//     none is lost, and no reader takes the old counts for the new slot's.
//     The wait is the recycler's two stores.
//   - A count that read its own (old) slot in the bucket just before the
//     swap, and adds after the counts were zeroed, lands in the new slot: it
//     moves forward by a window or more (the bucket's old slot was leaving
//     the window anyway). This needs calls ending a whole window apart at
//     the same instant.
//
// Only the calls inside count at the moment a bucket is recycled for a
// slot a window newer are affected: at most one count per other goroutine
// counting at that instant is moved. Calls that end in the same slot are
// counted exactly, however many end at once (a cold burst's).
// TestConcurrentCountsAtRolloversWithinTheBound checks the bound.
func (t *Throttler) count(e int64, accepted bool) {
	delta := uint64(oneRequest)
	if accepted {
		delta += oneAccept
	}
	b := &t.b[e%buckets]
	for {
		be := b.epoch.Load()
		switch {
		case be == e:
			b.counts.Add(delta)
			return
		case be == resetting:
			runtime.Gosched() // another caller is recycling the bucket
		case be > e:
			return
		case b.epoch.CompareAndSwap(be, resetting):
			b.counts.Store(0)
			b.epoch.Store(e)
		}
	}
}

// totals sums the buckets within the window of epoch e. A bucket whose slot
// changes while it is read is left out: it was being recycled for a slot
// newer than the oldest of e's window.
func (t *Throttler) totals(e int64) (requests, accepts int64) {
	for i := range t.b {
		b := &t.b[i]
		be := b.epoch.Load()
		if be < 0 || be <= e-buckets || be > e {
			continue // empty, resetting, or out of the window
		}
		c := b.counts.Load()
		if b.epoch.Load() == be {
			requests += int64(c >> 32)
			accepts += int64(c & (oneRequest - 1))
		}
	}
	return requests, accepts
}

// rate is the rejection probability for these counts.
func (t *Throttler) rate(requests, accepts int64) float64 {
	if requests < int64(t.cfg.MinimumRequests) {
		return 0
	}
	p := (float64(requests) - t.cfg.Multiplier*float64(accepts)) / float64(requests+1)
	return min(max(p, 0), t.cfg.MaxRejectionRate/100)
}

// RejectionRate returns the probability with which the next request would
// be rejected, from 0 to maxRejectionRate/100.
func (t *Throttler) RejectionRate() float64 {
	return t.rate(t.totals(t.epoch(t.clock.Now())))
}

// Counts returns the requests and the accepts counted in the current
// window. The requests are those rejected and those admitted that have
// ended Accepted or Refused; a request in flight is not among them yet, nor
// is its accept.
func (t *Throttler) Counts() (requests, accepts int64) {
	return t.totals(t.epoch(t.clock.Now()))
}

// Enter admits the request, or rejects it with the current probability. A
// rejected request counts at once, as a request; an admitted one counts
// nothing yet: its Exit counts it, with its verdict. The permit it returns
// is for Exit.
func (t *Throttler) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return t.EnterAt(ctx, t.clock.Now())
}

// EnterAt is Enter at now, a time read from the throttler's clock, for a
// pipeline that reads the time once for every gate (meshless's engine).
func (t *Throttler) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	if t.admit(now) {
		if t.rec != nil {
			t.rec.Record(ctx, resilience.Event{Type: resilience.EventAcquired})
		}
		return ctx, resilience.Permit{Ref: t}, nil
	}
	if t.rec != nil {
		t.rec.Record(ctx, resilience.Event{Type: resilience.EventRejection, Err: t.rej})
	}
	return ctx, resilience.Permit{}, t.rej
}

// admit draws whether the next request goes; a rejected one is counted at
// once.
func (t *Throttler) admit(now time.Time) bool {
	e := t.epoch(now)
	if p := t.rate(t.totals(e)); p > 0 && t.draw() < p {
		t.count(e, false)
		return false
	}
	return true
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

// Exit counts the admitted request as its verdict says, at the time it
// ended, r.End: Accepted counts a request and an accept, Refused a request,
// Uncounted nothing. r.End must come from the throttler's clock (the
// engine's pipelines use the same one); when it is zero,
// Exit reads the clock. A permit without a Ref (one its caller made to let
// a request by uncounted) counts nothing.
func (t *Throttler) Exit(_ context.Context, p resilience.Permit, r resilience.Result) error {
	if p.Ref == nil {
		return r.Err
	}
	v := t.verdict(r)
	if v != Accepted && v != Refused {
		return r.Err
	}
	end := r.End
	if end.IsZero() {
		end = t.clock.Now()
	}
	t.count(t.epoch(end), v == Accepted)
	return r.Err
}

// Execute runs fn through the throttler, classifying its error with
// resilience.DefaultClassifier.
func (t *Throttler) Execute(ctx context.Context, fn func(context.Context) error) (err error) {
	ctx, p, err := t.Enter(ctx)
	if err != nil {
		return err
	}
	start := t.clock.Now()
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
