package outlier

import (
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The interval detectors at their edges: no endpoints, one, fewer than
// minimumHosts. Nothing is ejected, nothing divides by zero.
func TestDetectEdges(t *testing.T) {
	every := Config{
		FailurePercentage:  FailurePercentage{Threshold: 1, MinimumHosts: 1, RequestVolume: 1},
		SuccessRate:        SuccessRate{StdevFactor: 0.001, MinimumHosts: 1, RequestVolume: 1},
		SlowCalls:          SlowCalls{RateThreshold: 1, RequestVolume: 1},
		MaxEjectionPercent: 100,
	}.withDefaults()
	fewHosts := Config{
		FailurePercentage:  FailurePercentage{Threshold: 1, MinimumHosts: 5, RequestVolume: 1},
		SuccessRate:        SuccessRate{StdevFactor: 0.001, MinimumHosts: 5, RequestVolume: 1},
		SlowCalls:          SlowCalls{Disabled: true},
		MaxEjectionPercent: 100,
	}.withDefaults()
	for _, tc := range []struct {
		name    string
		cfg     Config
		samples []sample
		hosts   int
		want    []verdict
	}{
		{name: "no endpoints", cfg: every},
		{name: "one endpoint, all failed and slow: the last one serves", cfg: every,
			samples: []sample{{failure: 10, slow: 10}}, hosts: 1},
		{name: "no calls anywhere", cfg: every, samples: make([]sample, 3), hosts: 3},
		{name: "fewer endpoints than minimumHosts, all failing", cfg: fewHosts,
			samples: []sample{{failure: 10}, {failure: 10}, {success: 10}}, hosts: 3},
		// Success rate over one judged endpoint: its rate is the mean and
		// the stdev 0, so it is never below the threshold.
		{name: "success rate over one judged endpoint", cfg: Config{
			SuccessRate:         SuccessRate{StdevFactor: 0.001, MinimumHosts: 1, RequestVolume: 5},
			FailurePercentage:   FailurePercentage{Disabled: true},
			SlowCalls:           SlowCalls{Disabled: true},
			ConsecutiveFailures: ConsecutiveFailures{Disabled: true},
			MaxEjectionPercent:  100,
		}.withDefaults(), samples: []sample{{failure: 10}, {success: 1}}, hosts: 2},
		{name: "the ejected do not count toward minimumHosts", cfg: Config{
			FailurePercentage:  FailurePercentage{Threshold: 50, MinimumHosts: 3, RequestVolume: 1},
			SuccessRate:        SuccessRate{Disabled: true},
			SlowCalls:          SlowCalls{Disabled: true},
			MaxEjectionPercent: 100,
		}.withDefaults(), samples: []sample{{ejected: true, failure: 10}, {failure: 10}, {success: 10}}, hosts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detect(&tc.cfg, tc.samples, tc.hosts)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("detect = %v, want %v", got, tc.want)
			}
		})
	}
	if got := successRateThreshold([]float64{0.25}, 1.9); got != 0.25 || math.IsNaN(got) {
		t.Errorf("successRateThreshold over one rate = %v, want the rate", got)
	}
}

// A code from the wire outside gRPC's 0–16 is an answer no healthy server
// gives: a failure, as UNKNOWN is; no shift past the code set.
func TestClassifyCodesFromTheWire(t *testing.T) {
	def := newClassifier(DefaultFailureStatusCodes())
	for _, c := range []codes.Code{17, 31, 32, 99, 1 << 20, math.MaxUint32} {
		if got := def.classify(status.Error(c, "")); got != resultFailure {
			t.Errorf("classify(%v) = %v, want a failure", c, got)
		}
	}
	// Listed codes beyond 16 are dropped, not shifted into the set.
	if got := newClassifier([]codes.Code{32 + codes.NotFound, 99}).classify(status.Error(codes.NotFound, "")); got != resultSuccess {
		t.Errorf("classify(NOT_FOUND) with codes 37 and 99 listed = %v, want a success", got)
	}
}
