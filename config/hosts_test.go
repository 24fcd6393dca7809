package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/config"
)

const hostsYAML = `
defaults:
  circuitBreaker: { failureStatusCodes: [UNAVAILABLE], slidingWindowSize: 50 }
  retry: { maxAttempts: 2 }
hosts:
  api.weather.example:
    circuitBreaker: { failureStatusCodes: [500, 503] }
    routes:
      "GET /v1/current/{city}":
        retry: { maxAttempts: 4, retryableStatusCodes: [503, 429] }
      "POST /v1/reports":
        retry: { enabled: false }
  127.0.0.1:8080:
    circuitBreaker: { keyBy: method }
    routes:
      /healthz: {}
`

func TestRouteResolvesHTTPLevels(t *testing.T) {
	cfg, err := config.Parse([]byte(hostsYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, host, route      string
		key                    string
		failure, ignored, retr config.Codes
		attempts               int // 0: no retry
		window                 int
	}{
		{name: "a route that writes retry", host: "api.weather.example", route: "GET /v1/current/{city}", key: "api.weather.example",
			failure: config.Codes{500, 503}, ignored: config.Codes{499}, retr: config.Codes{503, 429}, attempts: 4, window: 50},
		{name: "a route that turns retry off", host: "api.weather.example", route: "POST /v1/reports", key: "api.weather.example",
			failure: config.Codes{500, 503}, ignored: config.Codes{499}, retr: config.Codes{502, 503, 504}, window: 50},
		{name: "a route the host does not name", host: "api.weather.example", route: "_OTHER", key: "api.weather.example",
			failure: config.Codes{500, 503}, ignored: config.Codes{499}, retr: config.Codes{502, 503, 504}, attempts: 2, window: 50},
		{name: "keyBy method", host: "127.0.0.1:8080", route: "/healthz", key: "127.0.0.1:8080//healthz",
			failure: config.Codes{500, 502, 503, 504}, ignored: config.Codes{499}, retr: config.Codes{502, 503, 504}, attempts: 2, window: 50},
		{name: "an unknown host: the defaults, with HTTP's codes", host: "_OTHER", route: "_OTHER", key: "_OTHER",
			failure: config.Codes{500, 502, 503, 504}, ignored: config.Codes{499}, retr: config.Codes{502, 503, 504}, attempts: 2, window: 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := cfg.Resolve(config.HTTP, tc.host, tc.route)
			if m.Key != tc.key {
				t.Errorf("Key = %q, want %q", m.Key, tc.key)
			}
			if !slices.Equal(m.FailureCodes, tc.failure) || !slices.Equal(m.IgnoredCodes, tc.ignored) || !slices.Equal(m.RetryableCodes, tc.retr) {
				t.Errorf("codes: failure %v ignored %v retryable %v, want %v %v %v", m.FailureCodes, m.IgnoredCodes, m.RetryableCodes, tc.failure, tc.ignored, tc.retr)
			}
			switch {
			case tc.attempts == 0 && m.Retry != nil:
				t.Errorf("Retry = %+v, want none", m.Retry)
			case tc.attempts > 0 && (m.Retry == nil || m.Retry.MaxAttempts != tc.attempts):
				t.Errorf("Retry = %+v, want %d attempts", m.Retry, tc.attempts)
			}
			if m.Breaker == nil || m.Breaker.SlidingWindowSize != tc.window {
				t.Errorf("Breaker = %+v, want a window of %d", m.Breaker, tc.window)
			}
		})
	}
	// The gRPC side still reads the defaults' own codes.
	if m := cfg.Resolve(config.GRPC, "pkg.Svc", "Get"); !slices.Equal(m.FailureCodes, config.Codes{codes.Unavailable}) {
		t.Errorf("gRPC failure codes = %v, want [UNAVAILABLE]", m.FailureCodes)
	}
	for _, tc := range []struct {
		scope config.Scope
		group string
		want  bool
	}{
		{config.HTTP, "api.weather.example", true},
		{config.HTTP, "other.example", false},
		{config.GRPC, "api.weather.example", false},
	} {
		if got := cfg.HasGroup(tc.scope, tc.group); got != tc.want {
			t.Errorf("HasGroup(%v, %q) = %v, want %v", tc.scope, tc.group, got, tc.want)
		}
	}
}

func TestHostsErrorsNameThePath(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"a gRPC code under hosts", "hosts: { a.example: { circuitBreaker: { failureStatusCodes: [UNAVAILABLE] } } }",
			`hosts."a.example".circuitBreaker.failureStatusCodes[0]: unknown status code "UNAVAILABLE" (an HTTP status number 100-599 under hosts)`},
		{"a status past 599", "hosts: { a.example: { retry: { retryableStatusCodes: [600] } } }",
			`hosts."a.example".retry.retryableStatusCodes[0]: unknown status code 600 (an HTTP status number 100-599 under hosts)`},
		{"an HTTP status in the defaults", "defaults: { circuitBreaker: { failureStatusCodes: [503] } }",
			`defaults.circuitBreaker.failureStatusCodes[0]: unknown status code 503 (a gRPC code name such as UNAVAILABLE, or a number 0-16)`},
		{"a success as a failure", "hosts: { a.example: { circuitBreaker: { failureStatusCodes: [200] } } }",
			`hosts."a.example".circuitBreaker.failureStatusCodes[0]: 200 is a success: it cannot be a failure, ignored, retried or hedged on`},
		{"a failure also ignored", "hosts: { a.example: { circuitBreaker: { failureStatusCodes: [503], ignoredStatusCodes: [503] } } }",
			`hosts."a.example".circuitBreaker.ignoredStatusCodes: 503 is also in failureStatusCodes; a code is a failure or ignored, not both`},
		{"a host with a scheme", "hosts: { 'https://a.example': {} }",
			`hosts."https://a.example": want host[:port] as a request's URL writes it`},
		{"a host with a path", "hosts: { a.example/v1: {} }",
			`hosts."a.example/v1": want host[:port] as a request's URL writes it`},
		{"a host with a bad port", "hosts: { 'a.example:99999': {} }",
			`hosts."a.example:99999": want host[:port] as a request's URL writes it, such as api.weather.example or 127.0.0.1:8080; the port must be a number 1-65535`},
		{"a host in upper case", "hosts: { A.Example: {} }",
			`hosts."A.Example": write the host in lower case (a.example): hosts compare without case`},
		{"the unknown hosts' entry", "hosts: { _OTHER: {} }",
			`hosts._OTHER: _OTHER is the name of the entry unknown hosts share; it cannot be configured`},
		{"a bad pattern", "hosts: { a.example: { routes: { 'GET /a/{': {} } } }",
			`hosts."a.example".routes."GET /a/{": not a net/http ServeMux pattern: parsing "GET /a/{": at offset 7: bad wildcard segment (must end with '}')`},
		{"a pattern with a host", "hosts: { a.example: { routes: { 'a.example/x': {} } } }",
			`hosts."a.example".routes."a.example/x": want a net/http pattern "[METHOD ]/path" such as "GET /v1/current/{city}", with no host`},
		{"two patterns that match the same requests", "hosts: { a.example: { routes: { 'GET /a/{x}': {}, 'GET /a/{y}': {} } } }",
			`hosts."a.example".routes."GET /a/{y}": not a net/http ServeMux pattern: pattern "GET /a/{y}" conflicts with pattern "GET /a/{x}": GET /a/{y} matches the same requests as GET /a/{x}`},
		{"keyBy on a route", "hosts: { a.example: { routes: { /x: { circuitBreaker: { keyBy: method } } } } }",
			`hosts."a.example".routes."/x".circuitBreaker.keyBy: is set per service, not per method`},
		{"a shared breaker's key on a route", "hosts: { a.example: { routes: { /x: { circuitBreaker: { slidingWindowSize: 5 } } } } }",
			`hosts."a.example".routes."/x".circuitBreaker.slidingWindowSize: with keyBy: service one breaker serves the whole service`},
		{"an unknown key in a route", "hosts: { a.example: { routes: { /x: { retries: {} } } } }",
			`hosts."a.example".routes."/x".retries: unknown key`},
		{"a deadLetter section at a host", "hosts: { a.example: { deadLetter: { enabled: true } } }",
			`hosts."a.example".deadLetter: the dead-letter queue defers gRPC calls only; HTTP requests are not deferred`},
		{"a deadLetter section at a route", "hosts: { a.example: { routes: { /x: { deadLetter: {} } } } }",
			`hosts."a.example".routes."/x".deadLetter: the dead-letter queue defers gRPC calls only`},
		{"an out-of-range value at a host", "hosts: { a.example: { circuitBreaker: { failureRateThreshold: 150 } } }",
			`hosts."a.example".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("%T is not a *config.Error", err)
			}
		})
	}
}

// A Config built in Go is checked the same way: a status of the wrong kind
// for its scope is an error naming its path.
func TestGoBuiltCodesOfTheWrongScope(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  config.Config
		want string
	}{
		{"an HTTP status in a service", config.Config{Services: map[string]*config.Service{"pkg.Svc": {Policies: config.Policies{
			Retry: &config.RetrySection{RetryableStatusCodes: config.Codes{503}}}}}},
			`services."pkg.Svc".retry.retryableStatusCodes[0]: want a gRPC code (a name such as UNAVAILABLE, or 0-16) outside hosts, got 503`},
		{"a gRPC code at a host", config.Config{Hosts: map[string]*config.Host{"a.example": {Policies: config.Policies{
			Hedging: &config.HedgingSection{NonFatalStatusCodes: config.Codes{codes.Unavailable}}}}}},
			`hosts."a.example".hedging.nonFatalStatusCodes[0]: want an HTTP status number 100-599 under hosts, got 14`},
		{"a success at a route", config.Config{Hosts: map[string]*config.Host{"a.example": {Routes: map[string]*config.Policies{"/x": {
			CircuitBreaker: &config.CircuitBreakerSection{IgnoredStatusCodes: config.Codes{204}}}}}}},
			`hosts."a.example".routes."/x".circuitBreaker.ignoredStatusCodes[0]: 204 is a success`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}

func TestHostsMarshalRoundTrip(t *testing.T) {
	cfg, err := config.Parse([]byte(hostsYAML))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "- 503") || !strings.Contains(string(out), "- UNAVAILABLE") {
		t.Errorf("HTTP statuses as numbers and gRPC codes by name, got:\n%s", out)
	}
	back, err := config.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, route := range []string{"GET /v1/current/{city}", "POST /v1/reports", "_OTHER"} {
		a, b := cfg.Route("api.weather.example", route), back.Route("api.weather.example", route)
		if !slices.Equal(a.FailureCodes, b.FailureCodes) || !slices.Equal(a.RetryableCodes, b.RetryableCodes) || (a.Retry == nil) != (b.Retry == nil) {
			t.Errorf("%s: %+v after a round trip, want %+v", route, b, a)
		}
	}
}
