package httpmw_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/httpmw"
)

// Reload replaces the routes with the configuration: a route the new one
// adds takes its settings at once; an invalid configuration is refused and
// the old one stays.
func TestReload(t *testing.T) {
	h, _ := script(503)
	b := newBackend(t, h)
	chain := newChain(t, routesYAML, b.host)
	tr, _ := newTransport(t)
	client := chain.Client(tr)
	requests := func(path string) int64 {
		before := b.requests.Load()
		if _, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+path, nil)); err != nil {
			t.Fatal(err)
		}
		return b.requests.Load() - before
	}
	if n := requests("/new/1"); n != 3 {
		t.Fatalf("%d requests before the reload, want the host's 3", n)
	}
	next := strings.Replace(routesYAML, `      "/static/":`, "      \"GET /new/{id}\":\n        retry: { enabled: false }\n      \"/static/\":", 1)
	cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(next, "{{host}}", b.host)))
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if n := requests("/new/1"); n != 1 {
		t.Fatalf("%d requests after the reload, want the new route's 1", n)
	}
	bad := &httpmw.Config{Hosts: map[string]*config.Host{"Upper.Case": {}}}
	if err := chain.Reload(bad); err == nil || !strings.Contains(err.Error(), `hosts."Upper.Case"`) {
		t.Fatalf("Reload of an invalid config: %v", err)
	}
	if n := requests("/new/1"); n != 1 {
		t.Fatalf("%d requests after a refused reload, want 1", n)
	}
}

// Past WithMaxRoutes, a route runs with its host's entry.
func TestMaxRoutes(t *testing.T) {
	h, _ := script(503)
	b := newBackend(t, h)
	chain := newChain(t, routesYAML, b.host, httpmw.WithMaxRoutes(1))
	tr, _ := newTransport(t)
	client := chain.Client(tr)
	for _, path := range []string{"/other", "/items/1"} {
		if _, _, err := do(t, client, newRequest(t, http.MethodGet, b.URL+path, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if b.requests.Load() != 6 {
		t.Fatalf("%d requests, want 3 + 3: the route past the bound runs with its host's settings", b.requests.Load())
	}
	if _, err := httpmw.New(nil, httpmw.WithMaxRoutes(0)); err == nil {
		t.Fatal("WithMaxRoutes(0) accepted")
	}
}

// LoadConfig reads a file; an error names the file and the path.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("hosts: { api.example: { retry: { maxAttempts: 2 } } }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("hosts: { api.example: { retry: { maxAttempts: 0 } } }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := httpmw.LoadConfig(good)
	if err != nil || cfg.Hosts["api.example"] == nil {
		t.Fatalf("%+v, %v", cfg, err)
	}
	if _, err := httpmw.LoadConfig(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `hosts."api.example".retry.maxAttempts`) {
		t.Fatalf("error %v, want the file and the path", err)
	}
	if _, err := httpmw.LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

// A nil clock is refused by New, as every policy's WithClock refuses it:
// taken, it crashed the first response that carried a Retry-After, whose
// date the chain reads on its clock.
func TestNewRefusesANilClock(t *testing.T) {
	chain, err := httpmw.New(nil, httpmw.WithClock(nil))
	if err == nil {
		defer chain.Close()
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{"Retry-After": {"1"}}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h, Body: http.NoBody, Request: r}, nil
		})
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/x", nil)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("WithClock(nil) accepted, and a 503 with Retry-After panicked: %v", p)
				}
			}()
			if resp, err := chain.RoundTripper(rt).RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
		t.Fatal("WithClock(nil) accepted")
	}
	if !strings.Contains(err.Error(), "WithClock") {
		t.Errorf("error %q does not name WithClock", err)
	}
}
