package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/internal/memnet"
)

// memPods is the pods' network in the tests: an in-memory listener per pod
// (package memnet; see listenMem for why not bufconn), reached by its
// address.
type memPods struct {
	mu  sync.Mutex
	lis map[string]*memnet.Listener
}

func (b *memPods) listen(i int) (net.Listener, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lis == nil {
		b.lis = map[string]*memnet.Listener{}
	}
	addr := fmt.Sprintf("pod-%d", i+1)
	l := memnet.Listen()
	b.lis[addr] = l
	return l, addr, nil
}

func (b *memPods) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		b.mu.Lock()
		l, ok := b.lis[addr]
		b.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("no pod at %q", addr)
		}
		return l.DialContext(ctx)
	})}
}

// shortPodsConfig is the pods scenario with shorter phases, for the fake
// time of a synctest bubble.
func shortPodsConfig(t *testing.T) podsConfig {
	t.Helper()
	cfg, err := defaultPodsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Phases[podsHealthy].Duration = 500 * time.Millisecond
	cfg.Phases[podsFailing].Duration = 2 * time.Second
	cfg.Phases[podsSlow].Duration = 3 * time.Second
	return cfg
}

const (
	podsHealthy = iota
	podsFailing
	podsSlow
)

// runPodsInBubble plays cfg in a synctest bubble over net.Pipe: every
// latency, interval and ejection time is exact, however busy the machine.
func runPodsInBubble(t *testing.T, cfg podsConfig, w io.Writer) podsSummary {
	t.Helper()
	var sum podsSummary
	synctest.Test(t, func(t *testing.T) {
		cfg.Net = new(memPods)
		var err error
		if sum, err = runPods(t.Context(), cfg, w); err != nil {
			t.Fatalf("runPods: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	return sum
}

func TestMeshlessEjectsTheBadPod(t *testing.T) {
	cfg := shortPodsConfig(t)
	var out bytes.Buffer
	sum := runPodsInBubble(t, cfg, &out)
	t.Logf("output:\n%s", out.String())
	if len(sum.Clients) != 2 || sum.Clients[0] != "bare" || sum.Clients[1] != "meshless" {
		t.Fatalf("clients %v, want bare and meshless", sum.Clients)
	}
	bare, mesh := sum.Results[0], sum.Results[1]
	for i := range sum.Phases {
		b, m := bare[i], mesh[i]
		if b.All.Calls != m.All.Calls || b.All.Calls == 0 {
			t.Errorf("phase %d: the clients made %d and %d calls, want the same, some", i, b.All.Calls, m.All.Calls)
		}
		// Every call reached a pod (nothing retries, nothing rejects), and
		// the pods counted each.
		for _, r := range []podResult{b, m} {
			got := 0
			for _, n := range r.Received {
				got += n
			}
			if got != r.All.Calls {
				t.Errorf("phase %d: the pods received %d requests for %d calls", i, got, r.All.Calls)
			}
		}
	}

	// Healthy: round_robin spreads the calls, nothing fails, nobody is
	// ejected (half the answers are NOT_FOUND, which is no failure).
	for ci, res := range sum.Results {
		h := res[podsHealthy]
		if h.All.SuccessRate() != 100 {
			t.Errorf("%s while healthy: success %.1f%%, want 100%%", sum.Clients[ci], h.All.SuccessRate())
		}
		for p := range sum.Pods {
			if s := h.ReceivedShare(p); s < 20 || s > 30 {
				t.Errorf("%s while healthy: %s got %.1f%% of the requests, want about 25%%", sum.Clients[ci], sum.Pods[p], s)
			}
		}
	}
	for _, e := range sum.Ejections {
		if e.At < cfg.Phases[podsHealthy].Duration {
			t.Errorf("an ejection while every pod was healthy: %+v", e)
		}
	}

	// One pod fails: bare keeps sending it a quarter of the calls, which
	// fail; meshless ejects it after a few failures in a row and then sends
	// it nothing.
	bad := cfg.Phases[podsFailing].Bad
	b, m := bare[podsFailing], mesh[podsFailing]
	if s := b.ReceivedShare(bad); s < 20 {
		t.Errorf("bare sent the failing pod %.1f%% of its requests, want about 25%%", s)
	}
	if s := b.All.SuccessRate(); s > 80 {
		t.Errorf("bare's success with a failing pod = %.1f%%, want about 75%%", s)
	}
	at := sum.EjectedAt[podsFailing]
	if at < 0 || at > 200*time.Millisecond {
		t.Fatalf("meshless ejected the failing pod %v into the phase, want within 200ms (5 failures in a row at 50 calls a second each)", at)
	}
	if s := m.Ejected.BadShare(); s > 5 || m.Ejected.Calls == 0 {
		t.Errorf("once it was ejected, meshless sent the failing pod %.1f%% of %d calls, want at most 5%%", s, m.Ejected.Calls)
	}
	if s := m.ReceivedShare(bad); s > 5 {
		t.Errorf("meshless sent the failing pod %.1f%% of the phase's requests, want at most 5%%", s)
	}
	if s := m.Ejected.SuccessRate(); s < 99 {
		t.Errorf("meshless's success once the failing pod was ejected = %.1f%%, want at least 99%%", s)
	}

	// Another pod is slow: bare's p99 is the slow pod's latency; meshless
	// ejects it at an interval and its p99 is the healthy pods' again.
	bad = cfg.Phases[podsSlow].Bad
	b, m = bare[podsSlow], mesh[podsSlow]
	if s := b.ReceivedShare(bad); s < 20 {
		t.Errorf("bare sent the slow pod %.1f%% of its requests, want about 25%%", s)
	}
	if b.All.P99 < cfg.Slow || b.Ejected.P99 < cfg.Slow {
		t.Errorf("bare's p99 with a slow pod = %v (%v from meshless's ejection on), want at least the slow pod's %v", b.All.P99, b.Ejected.P99, cfg.Slow)
	}
	at = sum.EjectedAt[podsSlow]
	if at < 0 || at > 2*time.Second {
		t.Fatalf("meshless ejected the slow pod %v into the phase, want within two 1s intervals", at)
	}
	if s := m.Ejected.BadShare(); s > 5 {
		t.Errorf("once it was ejected, meshless sent the slow pod %.1f%% of its calls, want at most 5%%", s)
	}
	if p := m.Ejected.P99; p >= 100*time.Millisecond || p >= b.Ejected.P99/2 {
		t.Errorf("meshless's p99 once the slow pod was ejected = %v, want under the 100ms threshold and well under bare's %v", p, b.Ejected.P99)
	}

	reasons := map[int]string{}
	for _, e := range sum.Ejections {
		if !e.Returned {
			if _, ok := reasons[e.Pod]; !ok {
				reasons[e.Pod] = e.Reason
			}
		}
	}
	if want := map[int]string{0: "consecutive_failures", 1: "slow_calls"}; fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("first ejections by pod %v, want %v", reasons, want)
	}

	for _, want := range []string{
		"outlierDetection:",
		"▶ phase 2/3, one-failing for 2s: pod-1 answers UNAVAILABLE at once",
		"⊘ meshless ejected pod-1 (consecutive_failures)",
		"⊘ meshless ejected pod-2 (slow_calls)",
		"summary (pods):",
		"requests each pod received (pod-1 pod-2 pod-3 pod-4)",
		"the bad pod's share of requests",
		"once meshless had ejected pod-2",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

func TestPodsConfigRejectsBadValues(t *testing.T) {
	for _, bad := range []func(*podsConfig){
		func(c *podsConfig) { c.Pods = 1 },
		func(c *podsConfig) { c.Rate = 0 },
		func(c *podsConfig) { c.Slow = 0 },
		func(c *podsConfig) { c.Phases[podsSlow].Bad = 4 },
		func(c *podsConfig) { c.Phases[podsSlow].Duration = -time.Second },
		func(c *podsConfig) {
			for i := range c.Phases {
				c.Phases[i].Duration = 0
			}
		},
		func(c *podsConfig) { c.Client.OutlierDetection = nil },
	} {
		cfg := shortPodsConfig(t)
		bad(&cfg)
		if err := cfg.validate(); err == nil {
			t.Errorf("config %+v: no error", cfg)
		}
	}
	if err := shortPodsConfig(t).validate(); err != nil {
		t.Errorf("the default config: %v", err)
	}
}

func TestParseScenarios(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "all", want: "[backend pods cluster events]"},
		{in: "pods", want: "[pods]"},
		{in: "events,backend", want: "[events backend]"},
		{in: "cluster,pods, backend", want: "[cluster pods backend]"},
		{in: "clusters", err: `no scenario "clusters"`},
		{in: "pods,pods", err: `"pods" twice`},
		{in: "", err: `no scenario ""`},
	} {
		got, err := parseScenarios(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseScenarios(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || fmt.Sprint(got) != tc.want):
			t.Errorf("parseScenarios(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// The pods scenario's meshless client reports its ejections through the
// demo's otelmw Observer: they reach /metrics under the catalogue's names,
// with the pod's address and the reason.
func TestPodsEjectionsReachMetrics(t *testing.T) {
	var body string
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics()
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		cfg := shortPodsConfig(t)
		cfg.Quiet, cfg.Observer, cfg.Net = true, m.Observer, new(memPods)
		if _, err := runPods(t.Context(), cfg, io.Discard); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
		}
		body = rec.Body.String()
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, want := range [][]string{
		{"meshless_outlier_ejections_total{", `meshless_outlier_reason="consecutive_failures"`, `server_address="pod-1"`},
		{"meshless_outlier_ejections_total{", `meshless_outlier_reason="slow_calls"`, `server_address="pod-2"`},
		{"meshless_outlier_ejected{", `server_address="pod-2"`},
	} {
		found := false
		for _, line := range strings.Split(body, "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			found = found || all
		}
		if !found {
			t.Errorf("/metrics has no line with all of %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
