package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/retry"
)

// Issue 20 item 2: the built-in defaults are each policy package's
// DefaultConfig, except the one named override (failureRateThreshold 80).
func TestDefaultsComeFromThePolicyPackages(t *testing.T) {
	m := new(config.Config).Method("a.B", "Get")
	cb := circuitbreaker.DefaultConfig()
	cb.Name, cb.FailureRateThreshold = "a.B", config.FailureRateThreshold
	if *m.Breaker != cb {
		t.Errorf("breaker %+v, want the package's defaults with failureRateThreshold %v: %+v", *m.Breaker, config.FailureRateThreshold, cb)
	}
	rc := retry.DefaultConfig()
	rc.Name = "a.B/Get"
	if *m.Retry != rc {
		t.Errorf("retry %+v, want %+v", *m.Retry, rc)
	}
	bh := bulkhead.DefaultConfig()
	bh.Name = "a.B"
	if *m.Bulkhead != bh {
		t.Errorf("bulkhead %+v, want %+v", *m.Bulkhead, bh)
	}
	if m.PerAttempt != config.PerAttemptTimeout || m.Overall != config.OverallTimeout || m.RateLimiter != nil || m.Hedge != nil || m.DeadLetter != nil || m.Observe {
		t.Errorf("timeouts %v/%v, rate limiter %v, hedge %v, dead letter %v, observe %v", m.PerAttempt, m.Overall, m.RateLimiter, m.Hedge, m.DeadLetter, m.Observe)
	}
}

func TestModeAndDeadLetterResolve(t *testing.T) {
	cfg, err := config.Parse([]byte(`
defaults:
  mode: OBSERVE
  deadLetter: { path: /tmp/x.db, metadata: [X-Request-ID], maxAge: 1h }
services:
  a.B:
    methods:
      Get: { mode: enforce, deadLetter: { on: [RETRIES_EXHAUSTED] } }
      Put: { deadLetter: { enabled: false } }
`))
	if err != nil {
		t.Fatal(err)
	}
	get, put, other := cfg.Method("a.B", "Get"), cfg.Method("a.B", "Put"), cfg.Method("c.D", "X")
	if get.Observe || !put.Observe || !other.Observe {
		t.Errorf("observe: Get %v (enforce), Put %v, c.D %v (inherited observe)", get.Observe, put.Observe, other.Observe)
	}
	if get.DeadLetter == nil || get.DeadLetter.Config.On != deadletter.OnRetriesExhausted || get.DeadLetter.Config.MaxAge != time.Hour ||
		!get.DeadLetter.Config.Metadata.Has("x-request-id") || get.DeadLetter.Config.Path != "/tmp/x.db" {
		t.Errorf("Get's dead letter %+v", get.DeadLetter)
	}
	if put.DeadLetter != nil {
		t.Errorf("Put switched its dead letter off, got %+v", put.DeadLetter)
	}
	if other.DeadLetter == nil || other.DeadLetter.Config.On != deadletter.OnCircuitOpen {
		t.Errorf("the defaults' dead letter with its default on: %+v", other.DeadLetter)
	}
}

func TestDeadLetterProblemsNameTheirPath(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"defaults: { deadLetter: { on: [SOMETIMES] } }", `defaults.deadLetter.on[0]: must be CIRCUIT_OPEN or RETRIES_EXHAUSTED, got "SOMETIMES"`},
		{"defaults: { deadLetter: { on: [] } }", "defaults.deadLetter.on: is empty: name CIRCUIT_OPEN, RETRIES_EXHAUSTED or both"},
		{"defaults: { deadLetter: {} }\nservices: { a.B: { methods: { Get: { deadLetter: { on: [] } } } } }", `services."a.B".methods.Get.deadLetter.on: is empty`},
		{"defaults: { deadLetter: { store: redis } }", "defaults.deadLetter.namespace: store: redis needs a namespace"},
		{"defaults: { deadLetter: { store: redis, namespace: \"a{b}\" } }", `defaults.deadLetter.namespace: must be 1 to 128 printable ASCII characters without spaces or braces, got "a{b}"`},
		{"defaults: { deadLetter: { store: redis, namespace: \"a b\" } }", `defaults.deadLetter.namespace: must be 1 to 128`},
		{"defaults: { deadLetter: { store: disk } }", `defaults.deadLetter.store: must be local or redis, got "disk"`},
		{"defaults: { deadLetter: { store: redis, namespace: n, path: x } }", "defaults.deadLetter.path: is for store: local"},
		{"defaults: { deadLetter: { maxAge: -1s } }", "defaults.deadLetter.maxAge: must be positive"},
		{"defaults: { deadLetter: { metadata: [\"bad key\"] } }", "defaults.deadLetter.metadata: is not a metadata key"},
		{"defaults: { deadLetter: { metadata: x-request-id } }", "defaults.deadLetter.metadata: want a list"},
		{"defaults: { deadLetter: { store: redis, namespace: n, redis: { url: \"redis://u:s3cr3t@h:notaport\" } } }", "defaults.deadLetter.redis.url"},
		{"services: { a.B: { methods: { Get: { deadLetter: { maxAge: 1h } } } } }", `services."a.B".methods.Get.deadLetter.maxAge: with keyBy: service one dead-letter queue serves the whole service`},
		{"services: { a.B: { methods: { Get: { deadLetter: { on: [CIRCUIT_OPEN] } } } } }", `services."a.B".methods.Get.deadLetter: with keyBy: service the queue is the service's`},
		{"defaults: { mode: watch }", `defaults.mode: must be enforce or observe, got "watch"`},
	} {
		_, err := config.Parse([]byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n%v\nwant it to contain %q", tt.yaml, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error shows the password: %v", tt.yaml, err)
		}
	}
}

// A key inherited from a level above that conflicts with a key written
// below is reported at the key that was inherited, and the error names the
// level that inherits it: that level's own key may be the one to change.
// A problem of the level above itself is reported once, naming none.
func TestAProblemWithAnInheritedKeyNamesTheLevelThatMeetsIt(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want []string
	}{
		{"defaults: { circuitBreaker: { minimumNumberOfCalls: 10 } }\nservices: { a.B: { circuitBreaker: { slidingWindowSize: 5 } }, a.C: { circuitBreaker: { slidingWindowSize: 6 } } }", []string{
			`defaults.circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (5) for a COUNT_BASED window, which could then never decide, got 10; services."a.B" inherits it`,
			`defaults.circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (6) for a COUNT_BASED window, which could then never decide, got 10; services."a.C" inherits it`,
		}},
		{"services: { a.B: { circuitBreaker: { minimumNumberOfCalls: 10, keyBy: method }, methods: { M: { circuitBreaker: { slidingWindowSize: 5 } } } } }", []string{
			`services."a.B".circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (5) for a COUNT_BASED window, which could then never decide, got 10; services."a.B".methods.M inherits it`,
		}},
		{"defaults: { circuitBreaker: { slidingWindowSize: 5, minimumNumberOfCalls: 10 } }\nservices: { a.B: {}, a.C: {} }", []string{
			`defaults.circuitBreaker.minimumNumberOfCalls: must not exceed slidingWindowSize (5) for a COUNT_BASED window, which could then never decide, got 10`,
		}},
	} {
		_, err := config.Parse([]byte(tt.yaml))
		if err == nil {
			t.Fatalf("%s: no error", tt.yaml)
		}
		if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, tt.want) {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.yaml, got, tt.want)
		}
	}
}

// mode is read in any case at every level (docs/configuration.md): a
// service's or a host's too, whose settings are written inline beside
// methods or routes.
func TestModeInAnyCaseAtEveryLevel(t *testing.T) {
	cfg, err := config.Parse([]byte(`
defaults: { mode: Enforce }
services:
  a.B:
    mode: OBSERVE
    methods:
      Get: { mode: ENFORCE }
hosts:
  api.x:
    mode: Observe
    routes:
      "GET /v1": { mode: Enforce }
`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Method("a.B", "Put").Observe || cfg.Method("a.B", "Get").Observe || !cfg.Route("api.x", "GET /x").Observe || cfg.Route("api.x", "GET /v1").Observe {
		t.Errorf("observe: a.B/Put %v (want true), a.B/Get %v (want false), api.x %v (want true), api.x GET /v1 %v (want false)",
			cfg.Method("a.B", "Put").Observe, cfg.Method("a.B", "Get").Observe, cfg.Route("api.x", "GET /x").Observe, cfg.Route("api.x", "GET /v1").Observe)
	}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "mode: observe"); n != 2 || strings.Count(string(out), "mode: enforce") != 3 {
		t.Errorf("Marshal wrote the modes other than canonically:\n%s", out)
	}
}
