package grpcmw_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

// The configuration contract's example, less cluster (not in this release).
const contractExample = `
defaults:
  circuitBreaker:
    keyBy: service
    slidingWindowType: COUNT_BASED
    slidingWindowSize: 100
    minimumNumberOfCalls: 20
    failureRateThreshold: 50
    slowCallDurationThreshold: 2s
    slowCallRateThreshold: 100
    waitDurationInOpenState: 30s
    maxWaitDurationInOpenState: 5m
    permittedNumberOfCallsInHalfOpenState: 2
    maxWaitDurationInHalfOpenState: 0s
    failureStatusCodes: [UNAVAILABLE, INTERNAL, UNKNOWN, DEADLINE_EXCEEDED, DATA_LOSS]
    ignoredStatusCodes: [CANCELLED]
    mode: NORMAL
  retry:
    maxAttempts: 3
    initialBackoff: 100ms
    maxBackoff: 2s
    backoffMultiplier: 2
    jitter: 0.2
    retryableStatusCodes: [UNAVAILABLE]
  bulkhead:
    maxConcurrentCalls: 100
    maxWaitDuration: 0s
  timeout:
    perAttempt: 1s
    overall: 3s
retryThrottling:
  maxTokens: 10
  tokenRatio: 0.1
services:
  payment.PaymentService:
    circuitBreaker: { failureRateThreshold: 30 }
    methods:
      Charge:
        retry: { maxAttempts: 1 }
outlierDetection:
  interval: 10s
  baseEjectionTime: 30s
  maxEjectionTime: 300s
  maxEjectionPercent: 50
  consecutiveFailures: 5
  failurePercentage: { threshold: 85, minimumHosts: 3, requestVolume: 50 }
  successRate: { stdevFactor: 1.9, minimumHosts: 3, requestVolume: 100 }
  slowCalls: { durationThreshold: 500ms, rateThreshold: 50, requestVolume: 50 }
  childPolicy: round_robin
healthCheck:
  serviceName: ""
`

func TestParseTheContractExample(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(contractExample))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	svc := cfg.Services["payment.PaymentService"]
	if svc == nil || *svc.CircuitBreaker.FailureRateThreshold != 30 || *svc.Methods["Charge"].Retry.MaxAttempts != 1 {
		t.Fatalf("services parsed as %+v", svc)
	}
	cb := cfg.Defaults.CircuitBreaker
	if cb.SlowCallDurationThreshold.D() != 2*time.Second || cb.MaxWaitDurationInOpenState.D() != 5*time.Minute {
		t.Fatalf("durations parsed as %v, %v", cb.SlowCallDurationThreshold.D(), cb.MaxWaitDurationInOpenState.D())
	}
	if want := (config.Codes{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.DataLoss}); !reflect.DeepEqual(cb.FailureStatusCodes, want) {
		t.Fatalf("failure codes %v", cb.FailureStatusCodes)
	}
	if o := cfg.OutlierDetection; o == nil || *o.ConsecutiveFailures != 5 || o.SlowCalls.DurationThreshold.D() != 500*time.Millisecond || *cfg.HealthCheck.ServiceName != "" {
		t.Fatalf("outlierDetection, healthCheck parsed as %+v, %+v", o, cfg.HealthCheck)
	}
}

// outlierDetection and healthCheck are installed with the connection:
// Reload refuses to change them, and keeps the old configuration.
func TestReloadRefusesOutlierChanges(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte("outlierDetection: { consecutiveFailures: 5 }"))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	next, _ := grpcmw.ParseConfig([]byte("outlierDetection: { consecutiveFailures: 7 }"))
	if err := chain.Reload(next); err == nil || !strings.Contains(err.Error(), "dial again") {
		t.Fatalf("Reload = %v, want a refusal that says to dial again", err)
	}
	same, _ := grpcmw.ParseConfig([]byte("outlierDetection: { consecutiveFailures: 5 }\ndefaults: { retry: { maxAttempts: 2 } }"))
	if err := chain.Reload(same); err != nil {
		t.Fatalf("Reload with the same outlierDetection = %v", err)
	}
}

func TestAcceptedSpellings(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`{"defaults": {"retry": {"retryableStatusCodes": ["unavailable", 8, "Aborted"], "initialBackoff": "0.1s"}, "timeout": {"perAttempt": 0}}}`))
	if err != nil {
		t.Fatalf("JSON with lower-case and numeric codes: %v", err)
	}
	r := cfg.Defaults.Retry
	if want := (config.Codes{codes.Unavailable, codes.ResourceExhausted, codes.Aborted}); !reflect.DeepEqual(r.RetryableStatusCodes, want) {
		t.Fatalf("codes = %v, want %v", r.RetryableStatusCodes, want)
	}
	if r.InitialBackoff.D() != 100*time.Millisecond || cfg.Defaults.Timeout.PerAttempt.D() != 0 {
		t.Fatalf("durations = %v, %v", r.InitialBackoff.D(), cfg.Defaults.Timeout.PerAttempt.D())
	}
	if _, err := grpcmw.ParseConfig(nil); err != nil {
		t.Fatalf("an empty document: %v", err)
	}
	if _, err := grpcmw.ParseConfig([]byte("services:\n  a.B:\n    methods:\n      Get:\n")); err != nil {
		t.Fatalf("empty sections: %v", err)
	}
}

func TestInvalidConfigNamesThePath(t *testing.T) {
	const svc = `services."payment.PaymentService"`
	tests := []struct {
		name string
		yaml string
		want string // a line of the error
	}{
		{"unknown top-level key", "default: {}", `default: unknown key (known here: cluster, defaults, healthCheck, hosts, outlierDetection, retryThrottling, services)`},
		{"unknown section", "defaults: { retries: {} }", "defaults.retries: unknown key"},
		{"unknown breaker key", "defaults: { circuitBreaker: { failureRate: 50 } }", "defaults.circuitBreaker.failureRate: unknown key"},
		{"unknown method key", "services: { payment.PaymentService: { methods: { Charge: { retry: { attempts: 2 } } } } }", svc + ".methods.Charge.retry.attempts: unknown key"},
		{"rate out of range", "services: { payment.PaymentService: { circuitBreaker: { failureRateThreshold: 150 } } }", svc + ".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150"},
		{"slow rate zero", "defaults: { circuitBreaker: { slowCallRateThreshold: 0 } }", "defaults.circuitBreaker.slowCallRateThreshold: must be in (0, 100], got 0"},
		{"window size", "defaults: { circuitBreaker: { slidingWindowSize: 0 } }", "defaults.circuitBreaker.slidingWindowSize: must be in [1, 1048576] calls for COUNT_BASED, got 0"},
		{"minimum above window", "defaults: { circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 11 } }", "defaults.circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (10)"},
		{"window below the inherited minimum", "defaults: { circuitBreaker: { slidingWindowSize: 10 } }", "defaults.circuitBreaker.slidingWindowSize: must be at least minimumNumberOfCalls (20, inherited)"},
		{"window type", "defaults: { circuitBreaker: { slidingWindowType: SLIDING } }", `defaults.circuitBreaker.slidingWindowType: must be COUNT_BASED or TIME_BASED, got "SLIDING"`},
		{"mode", "defaults: { circuitBreaker: { mode: OFF } }", `defaults.circuitBreaker.mode: must be NORMAL, DISABLED, METRICS_ONLY or FORCED_OPEN, got "OFF"`},
		{"keyBy", "defaults: { circuitBreaker: { keyBy: host } }", `defaults.circuitBreaker.keyBy: must be service or method, got "host"`},
		{"wrong type int", "defaults: { circuitBreaker: { slidingWindowSize: ten } }", `defaults.circuitBreaker.slidingWindowSize: want an integer, got "ten"`},
		{"wrong type float", "defaults: { circuitBreaker: { failureRateThreshold: [50] } }", "defaults.circuitBreaker.failureRateThreshold: want a number, got a list"},
		{"wrong type bool", "defaults: { retry: { enabled: yes please } }", `defaults.retry.enabled: want true or false, got "yes please"`},
		{"duration without unit", "defaults: { timeout: { perAttempt: 5 } }", `defaults.timeout.perAttempt: want a duration such as 100ms or 2s, got "5"`},
		{"duration garbage", "defaults: { circuitBreaker: { waitDurationInOpenState: soon } }", `defaults.circuitBreaker.waitDurationInOpenState: want a duration such as 100ms or 2s, got "soon"`},
		{"negative duration", "defaults: { timeout: { overall: -1s } }", "defaults.timeout.overall: must not be negative (0 means none), got -1s"},
		{"open wait", "defaults: { circuitBreaker: { waitDurationInOpenState: 0s } }", "defaults.circuitBreaker.waitDurationInOpenState: must be positive, got 0s"},
		{"max open wait", "defaults: { circuitBreaker: { maxWaitDurationInOpenState: 1s } }", "defaults.circuitBreaker.maxWaitDurationInOpenState: must be 0 (no growth) or at least waitDurationInOpenState (30s), got 1s"},
		{"probes", "defaults: { circuitBreaker: { permittedNumberOfCallsInHalfOpenState: 0 } }", "defaults.circuitBreaker.permittedNumberOfCallsInHalfOpenState: must be at least 1, got 0"},
		{"unknown code", "defaults: { retry: { retryableStatusCodes: [UNAVAILABLE, UNAVAILABL] } }", `defaults.retry.retryableStatusCodes[1]: unknown status code "UNAVAILABL"`},
		{"code number", "defaults: { retry: { retryableStatusCodes: [17] } }", "defaults.retry.retryableStatusCodes[0]: unknown status code 17"},
		{"codes not a list", "defaults: { retry: { retryableStatusCodes: UNAVAILABLE } }", `defaults.retry.retryableStatusCodes: want a list of status codes such as [UNAVAILABLE], got "UNAVAILABLE"`},
		{"empty retryable", "defaults: { retry: { retryableStatusCodes: [] } }", "defaults.retry.retryableStatusCodes: must name at least one code"},
		{"OK a failure", "defaults: { circuitBreaker: { failureStatusCodes: [OK] } }", "defaults.circuitBreaker.failureStatusCodes: OK cannot be a failure"},
		{"both failure and ignored", "defaults: { circuitBreaker: { ignoredStatusCodes: [CANCELLED, UNAVAILABLE] } }", "defaults.circuitBreaker.ignoredStatusCodes: UNAVAILABLE is also in failureStatusCodes"},
		{"attempts", "services: { a.B: { methods: { Get: { retry: { maxAttempts: 0 } } } } }", `services."a.B".methods.Get.retry.maxAttempts: must be in [1, 100] (it counts the first call), got 0`},
		{"backoff", "defaults: { retry: { maxBackoff: 10ms } }", "defaults.retry.maxBackoff: must be at least initialBackoff (100ms), got 10ms"},
		{"jitter", "defaults: { retry: { jitter: 1.5 } }", "defaults.retry.jitter: must be in [0, 1), got 1.5"},
		{"multiplier", "defaults: { retry: { backoffMultiplier: 0.5 } }", "defaults.retry.backoffMultiplier: must be at least 1, got 0.5"},
		{"bulkhead size", "defaults: { bulkhead: { maxConcurrentCalls: 0 } }", "defaults.bulkhead.maxConcurrentCalls: must be at least 1, got 0"},
		{"bulkhead wait", "defaults: { bulkhead: { maxWaitDuration: -1s } }", "defaults.bulkhead.maxWaitDuration: must not be negative"},
		{"adaptive zero", "defaults: { bulkhead: { adaptive: { minLimit: 0 } } }", "defaults.bulkhead.adaptive.minLimit: must be at least 1"},
		{"adaptive order", "defaults: { bulkhead: { adaptive: { minLimit: 50, maxLimit: 10 } } }", "defaults.bulkhead.adaptive"},
		{"throttling tokens", "retryThrottling: { maxTokens: 0 }", "retryThrottling.maxTokens: must be in (0, 1000], got 0"},
		{"throttling ratio", "retryThrottling: { tokenRatio: 20 }", "retryThrottling.tokenRatio: must be at least 0.001 and at most maxTokens, got 20"},
		{"method breaker key under keyBy service", "services: { a.B: { methods: { Get: { circuitBreaker: { failureRateThreshold: 10 } } } } }", `services."a.B".methods.Get.circuitBreaker.failureRateThreshold: with keyBy: service one breaker serves the whole service`},
		{"method bulkhead under keyBy service", "services: { a.B: { methods: { Get: { bulkhead: { maxConcurrentCalls: 5 } } } } }", `services."a.B".methods.Get.bulkhead.maxConcurrentCalls: with keyBy: service one bulkhead serves the whole service`},
		{"keyBy on a method", "services: { a.B: { circuitBreaker: { keyBy: method }, methods: { Get: { circuitBreaker: { keyBy: service } } } } }", `services."a.B".methods.Get.circuitBreaker.keyBy: is set per service, not per method`},
		{"service name", "services: { /a.B/Get: {} }", `services."/a.B/Get": want a full service name`},
		{"method name", "services: { a.B: { methods: { a.B/Get: {} } } }", `services."a.B".methods."a.B/Get": want a method name such as Charge`},
		{"duplicate key", "defaults: { retry: { maxAttempts: 2, maxAttempts: 3 } }", "defaults.retry.maxAttempts: appears twice"},
		{"a section as a scalar", "defaults: { retry: 3 }", "defaults.retry: want a mapping of keys to values, got 3"},
		{"outlier detection", "outlierDetection: { failurePercentage: { threshold: 150 } }", "outlierDetection.failurePercentage.threshold: must be in [0, 100], got 150"},
		{"outlier consecutive failures", "outlierDetection: { consecutiveFailures: -1 }", "outlierDetection.consecutiveFailures: must be at least 0 (0 switches it off), got -1"},
		{"outlier cap 0 is not the default", "outlierDetection: { maxEjectionPercent: 0 }", "outlierDetection.maxEjectionPercent: must not be 0, which would take the default (50); to eject nothing, set enabled: false"},
		{"outlier threshold 0", "outlierDetection: { failurePercentage: { threshold: 0 } }", "outlierDetection.failurePercentage.threshold: must not be 0, which would take the default (85)"},
		{"outlier minimum hosts 0", "outlierDetection: { successRate: { minimumHosts: 0 } }", "outlierDetection.successRate.minimumHosts: must not be 0, which would take the default (3); write 1"},
		{"outlier request volume 0", "outlierDetection: { failurePercentage: { requestVolume: 0 } }", "outlierDetection.failurePercentage.requestVolume: must not be 0, which would take the default (50)"},
		{"outlier stdev factor 0", "outlierDetection: { successRate: { stdevFactor: 0 } }", "outlierDetection.successRate.stdevFactor: must not be 0"},
		{"outlier slow duration 0", "outlierDetection: { slowCalls: { durationThreshold: 0s } }", "outlierDetection.slowCalls.durationThreshold: must not be 0, which would take the default (500ms)"},
		{"outlier slow rate 0", "outlierDetection: { slowCalls: { rateThreshold: 0 } }", "outlierDetection.slowCalls.rateThreshold: must not be 0"},
		{"outlier slow volume 0", "outlierDetection: { slowCalls: { requestVolume: 0 } }", "outlierDetection.slowCalls.requestVolume: must not be 0"},
		{"not YAML", "defaults: [", "grpcmw: config: defaults: not valid YAML: did not find expected node content (line 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := grpcmw.ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParseConfig accepted it: %+v", cfg)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

func TestInheritedValuesAreCheckedWhereTheyAreWritten(t *testing.T) {
	// The method inherits the service's window and sets its own minimum:
	// the error names the method's key, once.
	_, err := grpcmw.ParseConfig([]byte(`
services:
  a.B:
    circuitBreaker: { keyBy: method, slidingWindowSize: 10, minimumNumberOfCalls: 5 }
    methods:
      Get: { circuitBreaker: { minimumNumberOfCalls: 50 } }
`))
	want := `services."a.B".methods.Get.circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (10)`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "minimumNumberOfCalls") != 1 {
		t.Fatalf("error:\n%v\nwant exactly one line containing %s", err, want)
	}
	// A bad default is reported once, at the default, not at every service.
	_, err = grpcmw.ParseConfig([]byte("defaults: { retry: { jitter: 2 } }\nservices: { a.B: {}, c.D: {} }"))
	if err == nil || strings.Count(err.Error(), "jitter") != 1 {
		t.Fatalf("error %v, want the default's jitter once", err)
	}
}

func TestAllErrorsAreReported(t *testing.T) {
	_, err := grpcmw.ParseConfig([]byte("defaults: { retry: { jitter: 2, maxAttempts: 0 }, bogus: 1 }"))
	for _, want := range []string{"defaults.retry.jitter", "defaults.retry.maxAttempts", "defaults.bogus"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	var pe *config.PathError
	if !errors.As(err, &pe) {
		t.Fatal("no PathError in the chain")
	}
}

func TestConfigRoundTrips(t *testing.T) {
	for _, doc := range []string{contractExample, "{}", `
retryThrottling: { enabled: false }
defaults:
  bulkhead: { adaptive: { minLimit: 2, maxLimit: 50 } }
  circuitBreaker: { ignoredStatusCodes: [] }
services:
  a.B:
    circuitBreaker: { keyBy: method, slidingWindowType: TIME_BASED, slidingWindowSize: 60 }
    retry: { enabled: false }
    methods:
      Get: { circuitBreaker: { failureRateThreshold: 10.5 }, timeout: { perAttempt: 250ms } }
`} {
		cfg, err := grpcmw.ParseConfig([]byte(doc))
		if err != nil {
			t.Fatalf("ParseConfig: %v", err)
		}
		out, err := cfg.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := grpcmw.ParseConfig(out)
		if err != nil {
			t.Fatalf("ParseConfig of its own output:\n%s\n%v", out, err)
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("round trip changed the config:\n%s", out)
		}
	}
}

func TestConfigBuiltInGo(t *testing.T) {
	cfg := &grpcmw.Config{
		Defaults: config.Policies{Retry: &config.RetrySection{MaxAttempts: config.Ptr(5), InitialBackoff: config.Dur(50 * time.Millisecond)}},
		Services: map[string]*config.Service{
			"a.B": {Methods: map[string]*config.Policies{"Get": {Timeout: &config.TimeoutSection{PerAttempt: config.Dur(-time.Second)}}}},
		},
	}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `services."a.B".methods.Get.timeout.perAttempt: must not be negative (0 means none), got -1s`) {
		t.Fatalf("Validate = %v", err)
	}
	cfg.Services["a.B"].Methods["Get"].Timeout.PerAttempt = config.Dur(0)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of a valid Go config: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "client.yaml")
	if err := os.WriteFile(path, []byte(contractExample), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := grpcmw.LoadConfig(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("defaults: { retry: { maxAttempts: 0 } }"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := grpcmw.LoadConfig(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("LoadConfig error %v, want it to start with the file's path", err)
	}
	if _, err := grpcmw.LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("LoadConfig of a missing file: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{contractExample, "{}", "defaults: { retry: 3 }", "services: { a.B: { methods: { X: ~ } } }", "- 1\n- 2", "&a [*a]", "defaults: &d { retry: *d }"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := grpcmw.ParseConfig(data) // must not panic
		if err != nil {
			return
		}
		out, err := cfg.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed config: %v", err)
		}
		if _, err := grpcmw.ParseConfig(out); err != nil {
			t.Fatalf("a parsed config's YAML does not parse:\n%s\n%v", out, err)
		}
	})
}

// A negative consecutiveFailures is reported once, with what 0 means (the
// outlier package's own check said it a second time).
func TestANegativeConsecutiveFailuresIsReportedOnce(t *testing.T) {
	_, err := grpcmw.ParseConfig([]byte("outlierDetection: { consecutiveFailures: -1 }\n"))
	if err == nil || strings.Count(err.Error(), "consecutiveFailures") != 1 {
		t.Fatalf("error:\n%v\nwant one line naming consecutiveFailures", err)
	}
}
