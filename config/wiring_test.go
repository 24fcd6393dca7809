package config_test

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/meshless/meshless/config"
)

// A wiring row is one policy key of docs/configuration.md: two telling
// values and what each changes in the method a transport's engine builds
// its policies from (config.Method). TestEveryPolicyKeyIsWired writes the
// key at every level it may be written, on both transports, and checks that
// it changes the method as its row says, and that a narrower level
// overrides a wider one.
type wiringRow struct {
	key  string
	a, b string // two telling values (YAML), different in effect
	// httpA and httpB replace a and b under hosts (HTTP status numbers);
	// codes marks a code list: the defaults' lists never apply to HTTP.
	httpA, httpB string
	codes        bool
	// pre is written in defaults first: what the key needs to mean anything
	// (an off-by-default section turned on).
	pre string
	// shared: the key's policy is the breaker key's (breaker, bulkhead,
	// throttler, rate limiter, dead-letter queue): a method or route may
	// write it only under keyBy: method.
	shared   bool
	grpcOnly bool // refused under hosts
	noMethod bool // never at the method level (keyBy)
	get      func(config.Method) any
}

const (
	svc, meth   = "pkg.Svc", "M"
	host, route = "api.test", "GET /x"
)

func wiringRows() []wiringRow {
	cb := func(m config.Method) any {
		if m.Breaker == nil {
			return nil
		}
		c := *m.Breaker
		c.Name = ""
		return c
	}
	retry := func(m config.Method) any {
		if m.Retry == nil {
			return nil
		}
		c := *m.Retry
		c.Name = ""
		return c
	}
	bh := func(m config.Method) any {
		if m.Bulkhead == nil {
			return nil
		}
		c := *m.Bulkhead
		c.Name = ""
		return c
	}
	th := func(m config.Method) any {
		if m.Throttler == nil {
			return nil
		}
		c := *m.Throttler
		c.Name = ""
		return c
	}
	rl := func(m config.Method) any {
		if m.RateLimiter == nil {
			return nil
		}
		c := *m.RateLimiter
		c.Name = ""
		return c
	}
	hedge := func(m config.Method) any {
		if m.Hedge == nil {
			return nil
		}
		c := *m.Hedge
		c.Name = ""
		return fmt.Sprint(c, m.NonFatalCodes)
	}
	dl := func(m config.Method) any {
		if m.DeadLetter == nil {
			return nil
		}
		return fmt.Sprintf("%+v", *m.DeadLetter)
	}
	timeouts := func(m config.Method) any { return [2]any{m.PerAttempt, m.Overall} }
	return []wiringRow{
		{key: "mode", a: "observe", b: "enforce", get: func(m config.Method) any { return m.Observe }},

		{key: "circuitBreaker.enabled", a: "false", b: "true", shared: true, get: cb},
		{key: "circuitBreaker.keyBy", a: "method", b: "service", noMethod: true, get: func(m config.Method) any { return m.Key }},
		{key: "circuitBreaker.slidingWindowType", a: "TIME_BASED", b: "COUNT_BASED", shared: true, get: cb},
		{key: "circuitBreaker.slidingWindowSize", a: "50", b: "60", shared: true, get: cb},
		{key: "circuitBreaker.minimumNumberOfCalls", a: "10", b: "5", shared: true, get: cb},
		{key: "circuitBreaker.failureRateThreshold", a: "50", b: "60", shared: true, get: cb},
		{key: "circuitBreaker.slowCallDurationThreshold", a: "500ms", b: "1s", shared: true, get: cb},
		{key: "circuitBreaker.slowCallRateThreshold", a: "80", b: "90", shared: true, get: cb},
		{key: "circuitBreaker.waitDurationInOpenState", a: "10s", b: "20s", shared: true, get: cb},
		{key: "circuitBreaker.maxWaitDurationInOpenState", a: "0s", b: "1m", shared: true, get: cb},
		{key: "circuitBreaker.permittedNumberOfCallsInHalfOpenState", a: "5", b: "3", shared: true, get: cb},
		{key: "circuitBreaker.maxWaitDurationInHalfOpenState", a: "30s", b: "10s", shared: true, get: cb},
		{key: "circuitBreaker.mode", a: "METRICS_ONLY", b: "FORCED_OPEN", shared: true, get: cb},
		{key: "circuitBreaker.failureStatusCodes", a: "[UNAVAILABLE]", b: "[INTERNAL]", httpA: "[502]", httpB: "[503]", codes: true,
			get: func(m config.Method) any { return m.FailureCodes.String() }},
		{key: "circuitBreaker.ignoredStatusCodes", a: "[CANCELLED, ABORTED]", b: "[ABORTED]", httpA: "[499, 429]", httpB: "[429]", codes: true,
			get: func(m config.Method) any { return m.IgnoredCodes.String() }},

		{key: "retry.enabled", a: "false", b: "true", get: retry},
		{key: "retry.maxAttempts", a: "4", b: "5", get: retry},
		{key: "retry.initialBackoff", a: "50ms", b: "20ms", get: retry},
		{key: "retry.maxBackoff", a: "1s", b: "500ms", get: retry},
		{key: "retry.backoffMultiplier", a: "1.5", b: "3", get: retry},
		{key: "retry.jitter", a: "0", b: "0.5", get: retry},
		{key: "retry.retryableStatusCodes", a: "[UNAVAILABLE, RESOURCE_EXHAUSTED]", b: "[ABORTED]", httpA: "[502]", httpB: "[429]", codes: true,
			get: func(m config.Method) any { return m.RetryableCodes.String() }},

		{key: "bulkhead.enabled", a: "false", b: "true", shared: true, get: bh},
		{key: "bulkhead.maxConcurrentCalls", a: "20", b: "30", shared: true, get: bh},
		{key: "bulkhead.maxWaitDuration", a: "50ms", b: "10ms", shared: true, get: bh},
		{key: "bulkhead.adaptive", a: "{}", b: "{ maxLimit: 50 }", shared: true, get: bh},
		{key: "bulkhead.adaptive.minLimit", a: "5", b: "2", pre: "bulkhead: { adaptive: {} }", shared: true, get: bh},
		{key: "bulkhead.adaptive.maxLimit", a: "50", b: "40", pre: "bulkhead: { adaptive: {} }", shared: true, get: bh},
		{key: "bulkhead.adaptive.initialLimit", a: "10", b: "15", pre: "bulkhead: { adaptive: {} }", shared: true, get: bh},

		{key: "timeout.enabled", a: "false", b: "true", get: timeouts},
		{key: "timeout.perAttempt", a: "200ms", b: "300ms", get: timeouts},
		{key: "timeout.overall", a: "1s", b: "2s", get: timeouts},

		{key: "rateLimiter", a: "{}", b: "{ limitForPeriod: 5 }", shared: true, get: rl},
		{key: "rateLimiter.enabled", a: "false", b: "true", pre: "rateLimiter: {}", shared: true, get: rl},
		{key: "rateLimiter.limitForPeriod", a: "10", b: "20", shared: true, get: rl},
		{key: "rateLimiter.limitRefreshPeriod", a: "1m", b: "2s", shared: true, get: rl},
		{key: "rateLimiter.timeoutDuration", a: "200ms", b: "100ms", shared: true, get: rl},

		{key: "hedging", a: "{}", b: "{ maxAttempts: 2 }", get: hedge},
		{key: "hedging.enabled", a: "false", b: "true", pre: "hedging: {}", get: hedge},
		{key: "hedging.maxAttempts", a: "2", b: "4", get: hedge},
		{key: "hedging.hedgingDelay", a: "15ms", b: "0s", get: hedge},
		{key: "hedging.nonFatalStatusCodes", a: "[UNAVAILABLE, RESOURCE_EXHAUSTED]", b: "[ABORTED]", httpA: "[502]", httpB: "[429]", codes: true,
			pre: "hedging: {}", get: hedge},

		{key: "adaptiveThrottling.enabled", a: "false", b: "true", shared: true, get: th},
		{key: "adaptiveThrottling.multiplier", a: "1.5", b: "3", shared: true, get: th},
		{key: "adaptiveThrottling.window", a: "1s", b: "2s", shared: true, get: th},
		{key: "adaptiveThrottling.minimumRequests", a: "50", b: "10", shared: true, get: th},
		{key: "adaptiveThrottling.maxRejectionRate", a: "75", b: "50", shared: true, get: th},

		{key: "deadLetter", a: "{}", b: "{ maxReplays: 3 }", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.enabled", a: "false", b: "true", pre: "deadLetter: {}", grpcOnly: true, get: dl},
		{key: "deadLetter.on", a: "[CIRCUIT_OPEN, RETRIES_EXHAUSTED]", b: "[RETRIES_EXHAUSTED]", pre: "deadLetter: {}", grpcOnly: true, get: dl},
		{key: "deadLetter.path", a: "/tmp/a.db", b: "/tmp/b.db", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.maxEntries", a: "10000", b: "20000", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.maxBytes", a: "10485760", b: "2048", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.maxAge", a: "1h", b: "2h", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.maxReplays", a: "3", b: "4", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.replayRate", a: "10", b: "0.5", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.replayTimeout", a: "5s", b: "1s", shared: true, grpcOnly: true, get: dl},
		{key: "deadLetter.metadata", a: "[x-request-id]", b: "[x-b3-traceid]", shared: true, grpcOnly: true, get: dl},
	}
}

// wiringElsewhere are the keys of docs/configuration.md this test does not
// write at the policy levels, each with where its effect is checked or why
// it is not.
var wiringElsewhere = map[string]string{
	"defaults":                   "a level",
	"services":                   "a level",
	"services.<service>.methods": "a level",
	"hosts":                      "a level",
	"hosts.<host>.routes":        "a level",
	"circuitBreaker":             "a section: its keys' rows",
	"retry":                      "a section: its keys' rows",
	"bulkhead":                   "a section: its keys' rows",
	"timeout":                    "a section: its keys' rows",
	"adaptiveThrottling":         "a section: its keys' rows",
	// store: redis needs namespace and a Redis; its keys are the store's.
	"deadLetter.store":      "TestTopLevelKeysAreWired",
	"deadLetter.namespace":  "TestTopLevelKeysAreWired",
	"deadLetter.redis":      "TestTopLevelKeysAreWired",
	"deadLetter.redis.addr": "TestTopLevelKeysAreWired",
	"deadLetter.redis.url":  "TestTopLevelKeysAreWired",
	"retryThrottling":       "TestTopLevelKeysAreWired",
	"cluster":               "TestTopLevelKeysAreWired",
	"cluster.redis":         "TestTopLevelKeysAreWired",
}

// topLevelPrefixes are the sections grpcmw alone maps (outlierConfig,
// healthName): grpcmw's TestEveryOutlierKeyIsWired has their rows.
var topLevelPrefixes = []string{"outlierDetection", "healthCheck"}

var wiringKeyRe = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// documentedKeys reads the first cell of every row of the reference's key
// tables, as internal/docscheck does.
func documentedKeys(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in, fence := false, false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		switch {
		case fence || !strings.HasPrefix(line, "|"):
			in = false
		case strings.HasPrefix(line, "| key |"):
			in = true
		case in:
			if m := wiringKeyRe.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("read only %d keys from docs/configuration.md", len(out))
	}
	return out
}

// TestEveryDocumentedKeyHasAWiringRow fails when the reference lists a key
// that no wiring test writes: a new key needs a row.
func TestEveryDocumentedKeyHasAWiringRow(t *testing.T) {
	rows := map[string]bool{}
	for _, r := range wiringRows() {
		rows[r.key] = true
	}
	for _, k := range documentedKeys(t) {
		top := false
		for _, p := range topLevelPrefixes {
			top = top || k == p || strings.HasPrefix(k, p+".")
		}
		if !rows[k] && wiringElsewhere[k] == "" && !top && !topLevelRows[k] {
			t.Errorf("docs/configuration.md documents `%s`, which has no row in wiringRows (config/wiring_test.go)", k)
		}
	}
}

// tree turns a dotted key and a YAML value into a mapping.
func tree(t *testing.T, key, value string) map[string]any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		t.Fatalf("%s: %v", value, err)
	}
	parts := strings.Split(key, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		v = map[string]any{parts[i]: v}
	}
	return v.(map[string]any)
}

// merge merges src into dst, deeply.
func merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if dm, ok := dst[k].(map[string]any); ok {
			if sm, ok := v.(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// wiringDoc builds a document from a mapping per level (0 defaults, 1 the
// group, 2 the name) of one transport.
func wiringDoc(t *testing.T, http bool, levels [3]map[string]any) []byte {
	t.Helper()
	group, name := levels[1], levels[2]
	if group == nil {
		group = map[string]any{}
	}
	if name != nil {
		k := "methods"
		if http {
			k = "routes"
		}
		gk := meth
		if http {
			gk = route
		}
		group[k] = map[string]any{gk: name}
	}
	doc := map[string]any{}
	if levels[0] != nil {
		doc["defaults"] = levels[0]
	}
	if http {
		doc["hosts"] = map[string]any{host: group}
	} else {
		doc["services"] = map[string]any{svc: group}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func resolveDoc(t *testing.T, http bool, doc []byte) (config.Method, error) {
	t.Helper()
	cfg, err := config.Parse(doc)
	if err != nil {
		return config.Method{}, err
	}
	if http {
		return cfg.Route(host, route), nil
	}
	return cfg.Method(svc, meth), nil
}

func TestEveryPolicyKeyIsWired(t *testing.T) {
	levelNames := [3]string{"defaults", "group", "method"}
	for _, r := range wiringRows() {
		for _, http := range []bool{false, true} {
			tr := "grpc"
			if http {
				tr = "http"
			}
			t.Run(r.key+"/"+tr, func(t *testing.T) {
				a, b := r.a, r.b
				if http && r.codes {
					a, b = r.httpA, r.httpB
				}
				// build writes pre in defaults, keyBy: method on the group when
				// the method level writes a shared key, and vals by level.
				build := func(vals [3]string) [3]map[string]any {
					var lv [3]map[string]any
					if r.pre != "" {
						var p map[string]any
						if err := yaml.Unmarshal([]byte(r.pre), &p); err != nil {
							t.Fatal(err)
						}
						lv[0] = p
					}
					if r.shared && vals[2] != "" {
						lv[1] = tree(t, "circuitBreaker.keyBy", "method")
					}
					for i, v := range vals {
						if v == "" {
							continue
						}
						if lv[i] == nil {
							lv[i] = map[string]any{}
						}
						merge(lv[i], tree(t, r.key, v))
					}
					return lv
				}
				resolveVals := func(vals [3]string) (any, error) {
					m, err := resolveDoc(t, http, wiringDoc(t, http, build(vals)))
					if err != nil {
						return nil, err
					}
					return r.get(m), nil
				}
				if http && r.grpcOnly {
					for i := range 3 {
						var vals [3]string
						vals[i] = a
						if i == 0 {
							continue // defaults serve both; HTTP ignores them
						}
						if _, err := resolveVals(vals); err == nil {
							t.Errorf("%s written at the %s level under hosts: accepted, want an error", r.key, levelNames[i])
						}
					}
					return
				}
				base, err := resolveVals([3]string{})
				if err != nil {
					t.Fatalf("baseline: %v", err)
				}
				if r.shared && !r.noMethod {
					// Under keyBy: service a method may not write a shared key.
					lv := build([3]string{})
					lv[2] = tree(t, r.key, a)
					if _, err := resolveDoc(t, http, wiringDoc(t, http, lv)); err == nil {
						t.Errorf("%s: %s at the method level under keyBy: service: accepted, want an error", tr, r.key)
					}
				}
				var effect any // what a does at the widest level it applies at
				for i := range 3 {
					var vals [3]string
					vals[i] = a
					if http && r.codes && i == 0 {
						vals[i] = r.a // the defaults' lists are gRPC's
					}
					if i == 2 && r.noMethod {
						if _, err := resolveVals(vals); err == nil {
							t.Errorf("%s at the method level: accepted, want an error", r.key)
						}
						continue
					}
					got, err := resolveVals(vals)
					if err != nil {
						t.Errorf("%s: %s at the %s level: %v", tr, r.key, levelNames[i], err)
						continue
					}
					if http && r.codes && i == 0 {
						if !reflect.DeepEqual(got, base) {
							t.Errorf("%s (a gRPC code list) in defaults changed an HTTP route: %v, want %v", r.key, got, base)
						}
						continue
					}
					if reflect.DeepEqual(got, base) {
						t.Errorf("%s: %s: %s at the %s level changed nothing (%v)", tr, r.key, a, levelNames[i], got)
						continue
					}
					if effect == nil {
						effect = got
					} else if !reflect.DeepEqual(got, effect) {
						t.Errorf("%s: %s: %s at the %s level resolved to %v, at a wider level to %v", tr, r.key, a, levelNames[i], got, effect)
					}
				}
				// A narrower level overrides a wider one.
				for _, p := range [][2]int{{0, 1}, {1, 2}, {0, 2}} {
					wide, narrow := p[0], p[1]
					if narrow == 2 && r.noMethod || http && r.codes && wide == 0 {
						continue
					}
					var both, alone, wideOnly [3]string
					both[wide], both[narrow] = a, b
					alone[narrow] = b
					wideOnly[wide] = a
					gb, err1 := resolveVals(both)
					ga, err2 := resolveVals(alone)
					gw, err3 := resolveVals(wideOnly)
					if err1 != nil || err2 != nil || err3 != nil {
						t.Errorf("%s: %s: %v %v %v", tr, r.key, err1, err2, err3)
						continue
					}
					if !reflect.DeepEqual(gb, ga) || reflect.DeepEqual(gb, gw) {
						t.Errorf("%s: %s: %s at the %s level under %s at the %s level resolved to %v; want %v (the narrower alone), not %v",
							tr, r.key, b, levelNames[narrow], a, levelNames[wide], gb, ga, gw)
					}
				}
			})
		}
	}
}

// topLevelRows are the client-wide keys (no levels) and the dead-letter
// store's: each document against a baseline, and what it must change.
var topLevelRows = map[string]bool{}

func init() {
	for _, r := range topLevelWiring() {
		topLevelRows[r.key] = true
	}
}

type topRow struct {
	key, base, with string
	get             func(*config.Config) any
}

func topLevelWiring() []topRow {
	throttling := func(c *config.Config) any { return c.Throttling() }
	clusterCfg := func(c *config.Config) any {
		cc, on, err := c.ClusterConfig()
		o, oerr := c.Cluster.Redis.Options()
		if o != nil {
			return fmt.Sprintf("%+v %v %v %s %s %d %v", cc, on, err, o.Addr, o.Password, o.DB, oerr)
		}
		return fmt.Sprintf("%+v %v %v %v", cc, on, err, oerr)
	}
	dl := func(c *config.Config) any {
		d := c.Method("pkg.Svc", "M").DeadLetter
		o, err := d.Redis.Options()
		if o != nil {
			return fmt.Sprintf("%+v %s %s %s %d %v", d.Config, d.Namespace, o.Addr, o.Password, o.DB, err)
		}
		return fmt.Sprintf("%+v %s %v", d.Config, d.Namespace, err)
	}
	const redisDL = "deadLetter: { store: redis, namespace: n1, redis: { addr: \"r1:6379\" } }"
	return []topRow{
		{"retryThrottling.enabled", "", "retryThrottling: { enabled: false }", throttling},
		{"retryThrottling.maxTokens", "", "retryThrottling: { maxTokens: 100 }", throttling},
		{"retryThrottling.tokenRatio", "", "retryThrottling: { tokenRatio: 0.5 }", throttling},
		{"cluster.enabled", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { enabled: false, redis: { addr: \"r:6379\" } }", clusterCfg},
		{"cluster.redis.addr", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { redis: { addr: \"q:6380\" } }", clusterCfg},
		{"cluster.redis.url", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { redis: { url: \"redis://:pw@r:6379/2\" } }", clusterCfg},
		{"cluster.namespace", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { namespace: a-b, redis: { addr: \"r:6379\" } }", clusterCfg},
		{"cluster.syncInterval", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { syncInterval: 500ms, redis: { addr: \"r:6379\" } }", clusterCfg},
		{"cluster.decideOn", "cluster: { redis: { addr: \"r:6379\" } }", "cluster: { decideOn: cluster, redis: { addr: \"r:6379\" } }", clusterCfg},
		{"deadLetter.store", "defaults: { deadLetter: {} }", "defaults: { deadLetter: { store: redis, namespace: n1 } }", dl},
		{"deadLetter.namespace", "defaults: { " + redisDL + " }", "defaults: { deadLetter: { store: redis, namespace: n2, redis: { addr: \"r1:6379\" } } }", dl},
		{"deadLetter.redis.addr", "defaults: { " + redisDL + " }", "defaults: { deadLetter: { store: redis, namespace: n1, redis: { addr: \"r2:6379\" } } }", dl},
		{"deadLetter.redis.url", "defaults: { " + redisDL + " }", "defaults: { deadLetter: { store: redis, namespace: n1, redis: { url: \"redis://r1:6379/3\" } } }", dl},
		{"deadLetter.redis", "defaults: { deadLetter: { store: redis, namespace: n1 } }", "defaults: { " + redisDL + " }", dl},
	}
}

// TestTopLevelKeysAreWired checks the client-wide keys and the dead-letter
// store's: each changes what its section resolves to.
func TestTopLevelKeysAreWired(t *testing.T) {
	for _, r := range topLevelWiring() {
		t.Run(r.key, func(t *testing.T) {
			base, err := config.Parse([]byte(r.base))
			if err != nil {
				t.Fatalf("baseline: %v", err)
			}
			with, err := config.Parse([]byte(r.with))
			if err != nil {
				t.Fatalf("with the key: %v", err)
			}
			if b, w := r.get(base), r.get(with); reflect.DeepEqual(b, w) {
				t.Errorf("%s changed nothing: %v", r.key, w)
			}
		})
	}
}

// TestStreamTimeoutsComeFromTheMethodAlone: a stream gets a timeout only
// from its method's own entry (docs/configuration.md, timeout), on both
// transports' resolution; timeout.enabled: false above switches it off.
func TestStreamTimeoutsComeFromTheMethodAlone(t *testing.T) {
	for _, tc := range []struct {
		doc                 string
		perAttempt, overall string // the stream's, "0s": none
	}{
		{"defaults: { timeout: { perAttempt: 2s, overall: 5s } }\nservices: { pkg.Svc: { timeout: { overall: 6s } } }\n", "0s", "0s"},
		{"services: { pkg.Svc: { methods: { M: { timeout: { overall: 7s } } } } }\n", "0s", "7s"},
		{"services: { pkg.Svc: { methods: { M: { timeout: { perAttempt: 300ms } } } } }\n", "300ms", "0s"},
		{"defaults: { timeout: { enabled: false } }\nservices: { pkg.Svc: { methods: { M: { timeout: { overall: 7s } } } } }\n", "0s", "0s"},
		{"defaults: { timeout: { enabled: false } }\nservices: { pkg.Svc: { methods: { M: { timeout: { enabled: true, overall: 7s } } } } }\n", "0s", "7s"},
	} {
		cfg, err := config.Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		m := cfg.Method(svc, meth)
		if got := [2]string{m.StreamPerAttempt.String(), m.StreamOverall.String()}; got != [2]string{tc.perAttempt, tc.overall} {
			t.Errorf("%s: a stream's timeouts are %v, want %s, %s", tc.doc, got, tc.perAttempt, tc.overall)
		}
	}
}
