package outlier

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMaxEjected(t *testing.T) {
	for _, tc := range []struct{ n, pct, want int }{
		{n: 0, pct: 50, want: 0},
		{n: 1, pct: 100, want: 0},
		{n: 2, pct: 50, want: 1},
		{n: 3, pct: 50, want: 1},
		{n: 4, pct: 50, want: 2},
		{n: 4, pct: 100, want: 3},
		{n: 10, pct: 10, want: 1},
		{n: 9, pct: 10, want: 0},
	} {
		if got := maxEjected(tc.n, tc.pct); got != tc.want {
			t.Errorf("maxEjected(%d, %d) = %d, want %d", tc.n, tc.pct, got, tc.want)
		}
	}
}

func TestEjectionTime(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		base, max time.Duration
		mult      int
		want      time.Duration
	}{
		{base: 30 * s, max: 300 * s, mult: 1, want: 30 * s},
		{base: 30 * s, max: 300 * s, mult: 2, want: 60 * s},
		{base: 30 * s, max: 300 * s, mult: 10, want: 300 * s},
		{base: 30 * s, max: 300 * s, mult: 1 << 40, want: 300 * s},
		{base: 30 * s, max: 10 * s, mult: 3, want: 30 * s}, // max below base: base
	} {
		if got := ejectionTime(tc.base, tc.max, tc.mult); got != tc.want {
			t.Errorf("ejectionTime(%v, %v, %d) = %v, want %v", tc.base, tc.max, tc.mult, got, tc.want)
		}
	}
}

func TestSuccessRateThreshold(t *testing.T) {
	for _, tc := range []struct {
		rates  []float64
		factor float64
		want   float64
	}{
		{rates: []float64{1, 1, 1, 1, 0.5}, factor: 1, want: 0.7},    // mean .9, stdev .2
		{rates: []float64{1, 1, 1, 1, 0.5}, factor: 1.9, want: 0.52}, // Envoy's default factor
		{rates: []float64{0.8, 0.8, 0.8}, factor: 1.9, want: 0.8},    // no spread
	} {
		if got := successRateThreshold(tc.rates, tc.factor); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("successRateThreshold(%v, %v) = %v, want %v", tc.rates, tc.factor, got, tc.want)
		}
	}
}

// hosts returns n healthy samples of volume calls each.
func hosts(n int, volume int64) []sample {
	s := make([]sample, n)
	for i := range s {
		s[i].success = volume
	}
	return s
}

func with(s []sample, i int, x sample) []sample {
	s = slices.Clone(s)
	s[i] = x
	return s
}

func TestDetect(t *testing.T) {
	base := func(set func(*Config)) Config {
		c := Config{
			ConsecutiveFailures: ConsecutiveFailures{Disabled: true},
			FailurePercentage:   FailurePercentage{Disabled: true},
			SuccessRate:         SuccessRate{Disabled: true},
			SlowCalls:           SlowCalls{Disabled: true},
		}
		set(&c)
		return c.withDefaults()
	}
	sr := base(func(c *Config) { c.SuccessRate = SuccessRate{StdevFactor: 1, MinimumHosts: 3, RequestVolume: 100} })
	fp := base(func(c *Config) {
		c.FailurePercentage = FailurePercentage{Threshold: 85, MinimumHosts: 3, RequestVolume: 50}
	})
	slow := base(func(c *Config) { c.SlowCalls = SlowCalls{RateThreshold: 50, RequestVolume: 50} })
	all := base(func(c *Config) {
		c.SuccessRate, c.FailurePercentage, c.SlowCalls = sr.SuccessRate, fp.FailurePercentage, slow.SlowCalls
		c.MaxEjectionPercent = 100
	})
	for _, tc := range []struct {
		name    string
		cfg     Config
		samples []sample
		want    []verdict
	}{
		{name: "success rate ejects the outlier", cfg: sr,
			samples: with(hosts(5, 100), 4, sample{success: 50, failure: 50}),
			want:    []verdict{{4, ReasonSuccessRate}}},
		{name: "success rate: too few hosts with volume", cfg: sr,
			samples: with(hosts(2, 100), 1, sample{success: 50, failure: 50})},
		{name: "success rate: outlier below volume is not judged", cfg: sr,
			samples: with(hosts(5, 100), 4, sample{success: 10, failure: 89})},
		{name: "success rate: all equally bad, no outlier", cfg: sr,
			samples: []sample{{success: 50, failure: 50}, {success: 50, failure: 50}, {success: 50, failure: 50}}},
		{name: "failure percentage at the threshold ejects", cfg: fp,
			samples: with(hosts(3, 100), 0, sample{success: 15, failure: 85}),
			want:    []verdict{{0, ReasonFailurePercentage}}},
		{name: "failure percentage just below does not", cfg: fp,
			samples: with(hosts(3, 100), 0, sample{success: 16, failure: 84})},
		{name: "failure percentage: too few hosts", cfg: fp,
			samples: with(hosts(3, 10), 0, sample{failure: 100})},
		{name: "failure percentage: cap of 50 % of 4 is 2", cfg: fp,
			samples: []sample{{failure: 100}, {failure: 100}, {failure: 100}, {failure: 100}},
			want:    []verdict{{0, ReasonFailurePercentage}, {1, ReasonFailurePercentage}}},
		{name: "already ejected count toward the cap", cfg: fp,
			samples: []sample{{ejected: true}, {ejected: true}, {failure: 100}, {failure: 100}}},
		{name: "cap never ejects the last endpoint", cfg: base(func(c *Config) {
			c.FailurePercentage, c.MaxEjectionPercent = FailurePercentage{Threshold: 1, MinimumHosts: 1, RequestVolume: 1}, 100
		}),
			samples: []sample{{failure: 100}, {failure: 100}},
			want:    []verdict{{0, ReasonFailurePercentage}}},
		{name: "slow calls at the rate ejects", cfg: slow,
			samples: with(hosts(2, 100), 1, sample{success: 100, slow: 50}),
			want:    []verdict{{1, ReasonSlowCalls}}},
		{name: "slow calls below the rate does not", cfg: slow,
			samples: with(hosts(2, 100), 1, sample{success: 100, slow: 49})},
		{name: "slow calls below volume does not", cfg: slow,
			samples: with(hosts(2, 100), 1, sample{success: 40, slow: 40})},
		// Rates 1, 1, 0, .45: success rate (factor 1) ejects the third; the
		// fourth, 55 % failed, is still judged by failure percentage with
		// 4 hosts of volume, the third among them, as Envoy and gRPC do.
		{name: "an endpoint success rate ejected still counts toward failure percentage's minimumHosts",
			cfg: base(func(c *Config) {
				c.SuccessRate = SuccessRate{StdevFactor: 1, MinimumHosts: 4, RequestVolume: 100}
				c.FailurePercentage = FailurePercentage{Threshold: 50, MinimumHosts: 4, RequestVolume: 100}
				c.MaxEjectionPercent = 100
			}),
			samples: []sample{{success: 100}, {success: 100}, {failure: 100}, {success: 45, failure: 55}},
			want:    []verdict{{2, ReasonSuccessRate}, {3, ReasonFailurePercentage}}},
		{name: "each endpoint is ejected once, success rate first", cfg: all,
			samples: append(with(hosts(5, 200), 4, sample{failure: 200, slow: 200}), sample{success: 100, slow: 100}),
			want:    []verdict{{4, ReasonSuccessRate}, {5, ReasonSlowCalls}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detect(&tc.cfg, tc.samples, len(tc.samples))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("detect = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	busy := func(reason, domain string) error {
		st, err := status.New(codes.ResourceExhausted, "busy").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	withRE := newClassifier([]codes.Code{codes.ResourceExhausted, codes.Unavailable})
	def := newClassifier(DefaultFailureStatusCodes())
	for _, tc := range []struct {
		name string
		c    classifier
		err  error
		want result
	}{
		{name: "nil", c: def, err: nil, want: resultSuccess},
		{name: "UNAVAILABLE", c: def, err: status.Error(codes.Unavailable, ""), want: resultFailure},
		{name: "DEADLINE_EXCEEDED", c: def, err: status.Error(codes.DeadlineExceeded, ""), want: resultFailure},
		{name: "NOT_FOUND", c: def, err: status.Error(codes.NotFound, ""), want: resultSuccess},
		{name: "CANCELLED", c: def, err: status.Error(codes.Canceled, ""), want: resultIgnored},
		{name: "CANCELLED even if listed", c: newClassifier([]codes.Code{codes.Canceled}), err: status.Error(codes.Canceled, ""), want: resultIgnored},
		{name: "transport error", c: def, err: errors.New("connection reset"), want: resultFailure},
		{name: "wrapped status", c: def, err: fmt.Errorf("x: %w", status.Error(codes.Internal, "")), want: resultFailure},
		{name: "RESOURCE_EXHAUSTED listed", c: withRE, err: status.Error(codes.ResourceExhausted, ""), want: resultFailure},
		{name: "BULKHEAD_FULL ignored though listed", c: withRE, err: busy("BULKHEAD_FULL", "meshless.dev"), want: resultIgnored},
		{name: "RATE_LIMITED ignored though listed", c: withRE, err: busy("RATE_LIMITED", "meshless.dev"), want: resultIgnored},
		{name: "THROTTLED ignored though listed", c: withRE, err: busy("THROTTLED", "meshless.dev"), want: resultIgnored},
		{name: "other domain's reason counts", c: withRE, err: busy("BULKHEAD_FULL", "example.com"), want: resultFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.classify(tc.err); got != tc.want {
				t.Fatalf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
