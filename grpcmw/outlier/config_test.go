package outlier_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/grpcmw/outlier"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  outlier.Config
		want string // "" for valid
	}{
		{name: "zero is valid", cfg: outlier.Config{}},
		{name: "percent", cfg: outlier.Config{FailurePercentage: outlier.FailurePercentage{Threshold: 150}},
			want: "outlierDetection.failurePercentage.threshold: must be in [0, 100], got 150"},
		{name: "max percent", cfg: outlier.Config{MaxEjectionPercent: -1},
			want: "outlierDetection.maxEjectionPercent: must be in [0, 100], got -1"},
		{name: "negative interval", cfg: outlier.Config{Interval: -time.Second},
			want: "outlierDetection.interval: must be >= 0, got -1s"},
		{name: "max below base", cfg: outlier.Config{BaseEjectionTime: time.Minute, MaxEjectionTime: time.Second},
			want: "outlierDetection.maxEjectionTime: must be >= baseEjectionTime (1m0s), got 1s"},
		{name: "stdev factor", cfg: outlier.Config{SuccessRate: outlier.SuccessRate{StdevFactor: -1}},
			want: "outlierDetection.successRate.stdevFactor: must be >= 0, got -1"},
		{name: "slow rate", cfg: outlier.Config{SlowCalls: outlier.SlowCalls{RateThreshold: 101}},
			want: "outlierDetection.slowCalls.rateThreshold: must be in [0, 100], got 101"},
		{name: "code", cfg: outlier.Config{FailureStatusCodes: []codes.Code{codes.Unavailable, 42}},
			want: "outlierDetection.failureStatusCodes[1]: must be a gRPC code 0-16, got 42"},
		{name: "unknown child", cfg: outlier.Config{ChildPolicy: "nope"},
			want: `outlierDetection.childPolicy: no balancer named "nope" is registered`},
		{name: "pick_first child", cfg: outlier.Config{ChildPolicy: "pick_first"},
			want: "outlierDetection.childPolicy: pick_first sends every call to one endpoint"},
		{name: "itself", cfg: outlier.Config{ChildPolicy: outlier.Name},
			want: "outlierDetection.childPolicy: must not be meshless_outlier itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func parse(js string) error {
	_, err := balancer.Get(outlier.Name).(balancer.ConfigParser).ParseConfig(json.RawMessage(js))
	return err
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, js, want string }{
		{name: "unknown key", js: `{"intervall":"1s"}`, want: `unknown field "intervall"`},
		{name: "duration not a string", js: `{"interval":10}`, want: `want a duration string such as "10s", got 10`},
		{name: "bad duration", js: `{"baseEjectionTime":"soon"}`, want: `got "soon"`},
		{name: "bad code", js: `{"failureStatusCodes":["UNAVAIL"]}`, want: `want a gRPC code name (UNAVAILABLE) or number 0-16, got "UNAVAIL"`},
		{name: "out of range", js: `{"failurePercentage":{"threshold":150}}`,
			want: "meshless_outlier: outlierDetection.failurePercentage.threshold: must be in [0, 100], got 150"},
		{name: "unknown monitor", js: `{"monitor":"monitor-0"}`, want: `outlierDetection.monitor: no open Monitor named "monitor-0"`},
		{name: "unknown child", js: `{"childPolicy":"nope"}`, want: `no balancer named "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parse(tc.js); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseConfig(%s) = %v, want %q", tc.js, err, tc.want)
			}
		})
	}
	for _, js := range []string{`{}`, `{"failureStatusCodes":["unavailable", 13]}`, `{"slowCalls":{"enabled":false}}`} {
		if err := parse(js); err != nil {
			t.Errorf("ParseConfig(%s) = %v, want nil", js, err)
		}
	}
}

func TestServiceConfigJSON(t *testing.T) {
	cfg := outlier.Config{
		Interval:            2 * time.Second,
		ConsecutiveFailures: outlier.ConsecutiveFailures{Disabled: true},
		SlowCalls:           outlier.SlowCalls{DurationThreshold: 250 * time.Millisecond},
		FailureStatusCodes:  []codes.Code{codes.Unavailable},
	}
	name := "payment.PaymentService"
	sc, err := outlier.ServiceConfigJSON(cfg, &name)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		LB     []map[string]json.RawMessage `json:"loadBalancingConfig"`
		Health struct {
			ServiceName string `json:"serviceName"`
		} `json:"healthCheckConfig"`
	}
	if err := json.Unmarshal([]byte(sc), &doc); err != nil {
		t.Fatalf("%s: %v", sc, err)
	}
	if len(doc.LB) != 1 || doc.LB[0][outlier.Name] == nil || doc.Health.ServiceName != name {
		t.Fatalf("service config %s", sc)
	}
	for _, want := range []string{`"interval":"2s"`, `"consecutiveFailures":{"enabled":false,"threshold":5}`,
		`"durationThreshold":"250ms"`, `"failureStatusCodes":["UNAVAILABLE"]`, `"childPolicy":"round_robin"`} {
		if !strings.Contains(sc, want) {
			t.Errorf("service config lacks %s: %s", want, sc)
		}
	}
	if err := parse(string(doc.LB[0][outlier.Name])); err != nil {
		t.Fatalf("its own output does not parse: %v", err)
	}
	if _, err := outlier.ServiceConfigJSON(outlier.Config{MaxEjectionPercent: 101}, nil); err == nil {
		t.Fatal("invalid config: no error")
	}
	noHC, _ := outlier.ServiceConfigJSON(outlier.Config{}, nil)
	if strings.Contains(noHC, "healthCheckConfig") {
		t.Fatalf("health check without asking: %s", noHC)
	}
}

func TestConfigEqual(t *testing.T) {
	a := outlier.Config{FailureStatusCodes: []codes.Code{codes.Unavailable, codes.Internal}}
	b := outlier.Config{FailureStatusCodes: []codes.Code{codes.Internal, codes.Unavailable}, Interval: 10 * time.Second}
	if !a.Equal(b) {
		t.Error("same config (defaults resolved, codes in another order) not Equal")
	}
	if a.Equal(outlier.Config{}) {
		t.Error("different failure codes Equal")
	}
	if !(outlier.Config{}).Equal(outlier.Config{MaxEjectionPercent: 50, ChildPolicy: "round_robin"}) {
		t.Error("zero config not Equal to its defaults")
	}
}
