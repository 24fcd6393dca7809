package grpcmw_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // a child policy to name

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/grpcmw/outlier"
)

// TestEveryOutlierKeyIsWired writes each outlierDetection and healthCheck
// key of docs/configuration.md (config.TestEveryDocumentedKeyHasAWiringRow
// sends them here) and checks that it changes the service config
// DialOptions installs, which the balancer's own parser accepts.
func TestEveryOutlierKeyIsWired(t *testing.T) {
	const od = "outlierDetection: {}\n"
	for _, r := range []struct{ key, base, with string }{
		{"outlierDetection", "", od},
		{"outlierDetection.enabled", od, "outlierDetection: { enabled: false }\nhealthCheck: {}\n"},
		{"outlierDetection.interval", od, "outlierDetection: { interval: 5s }\n"},
		{"outlierDetection.baseEjectionTime", od, "outlierDetection: { baseEjectionTime: 15s }\n"},
		{"outlierDetection.maxEjectionTime", od, "outlierDetection: { maxEjectionTime: 2m }\n"},
		{"outlierDetection.maxEjectionPercent", od, "outlierDetection: { maxEjectionPercent: 34 }\n"},
		{"outlierDetection.consecutiveFailures", od, "outlierDetection: { consecutiveFailures: 3 }\n"},
		{"outlierDetection.failurePercentage", od, "outlierDetection: { failurePercentage: { threshold: 50 } }\n"},
		{"outlierDetection.failurePercentage.enabled", od, "outlierDetection: { failurePercentage: { enabled: false } }\n"},
		{"outlierDetection.failurePercentage.threshold", od, "outlierDetection: { failurePercentage: { threshold: 50 } }\n"},
		{"outlierDetection.failurePercentage.minimumHosts", od, "outlierDetection: { failurePercentage: { minimumHosts: 2 } }\n"},
		{"outlierDetection.failurePercentage.requestVolume", od, "outlierDetection: { failurePercentage: { requestVolume: 20 } }\n"},
		{"outlierDetection.successRate", od, "outlierDetection: { successRate: { enabled: false } }\n"},
		{"outlierDetection.successRate.enabled", od, "outlierDetection: { successRate: { enabled: false } }\n"},
		{"outlierDetection.successRate.stdevFactor", od, "outlierDetection: { successRate: { stdevFactor: 1.5 } }\n"},
		{"outlierDetection.successRate.minimumHosts", od, "outlierDetection: { successRate: { minimumHosts: 5 } }\n"},
		{"outlierDetection.successRate.requestVolume", od, "outlierDetection: { successRate: { requestVolume: 200 } }\n"},
		{"outlierDetection.slowCalls", od, "outlierDetection: { slowCalls: { durationThreshold: 1s } }\n"},
		{"outlierDetection.slowCalls.enabled", od, "outlierDetection: { slowCalls: { enabled: false } }\n"},
		{"outlierDetection.slowCalls.durationThreshold", od, "outlierDetection: { slowCalls: { durationThreshold: 250ms } }\n"},
		{"outlierDetection.slowCalls.rateThreshold", od, "outlierDetection: { slowCalls: { rateThreshold: 80 } }\n"},
		{"outlierDetection.slowCalls.requestVolume", od, "outlierDetection: { slowCalls: { requestVolume: 20 } }\n"},
		{"outlierDetection.childPolicy", od, "outlierDetection: { childPolicy: weighted_round_robin }\n"},
		{"healthCheck", "", "healthCheck: {}\n"},
		{"healthCheck.serviceName", "healthCheck: {}\n", "healthCheck: { serviceName: payment.PaymentService }\n"},
		// The balancer's failures are the defaults' failureStatusCodes…
		{"defaults.circuitBreaker.failureStatusCodes", od, od + "defaults: { circuitBreaker: { failureStatusCodes: [UNAVAILABLE] } }\n"},
	} {
		t.Run(r.key, func(t *testing.T) {
			base, with := outlierServiceConfig(t, r.base), outlierServiceConfig(t, r.with)
			if base == with {
				t.Errorf("%s changed nothing in the service config: %s", r.key, with)
			}
		})
	}
	// … and not a service's.
	base := outlierServiceConfig(t, od)
	if with := outlierServiceConfig(t, od+"services: { a.B: { circuitBreaker: { failureStatusCodes: [UNAVAILABLE] } } }\n"); with != base {
		t.Errorf("a service's failureStatusCodes changed the balancer's: %s, want %s", with, base)
	}
}

// outlierServiceConfig returns the service config a chain built from doc
// installs, without the chain's monitor name, after checking that the
// balancer parses it.
func outlierServiceConfig(t *testing.T, doc string) string {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	sc, err := grpcmw.ServiceConfigOf(chain)
	if err != nil || sc == "" {
		return sc
	}
	var v struct {
		LB     []map[string]map[string]any `json:"loadBalancingConfig"`
		Health any                         `json:"healthCheckConfig"`
	}
	if err := json.Unmarshal([]byte(sc), &v); err != nil {
		t.Fatal(err)
	}
	lb := v.LB[0][outlier.Name]
	delete(lb, "monitor")
	raw, err := json.Marshal(lb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := balancer.Get(outlier.Name).(balancer.ConfigParser).ParseConfig(raw); err != nil {
		t.Fatalf("the balancer refuses %s: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
