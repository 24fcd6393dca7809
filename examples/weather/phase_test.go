package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A request sent in the healthy phase that reaches the API after the slow
// phase began (a busy machine, a retry) is answered and counted as the
// healthy phase's: at once, not held for -hang. The API's current phase
// answers only a request that names none. In a synctest bubble: the slow
// phase's hang is fake time, and the API's 2ms of work exact.
func TestAPIAnswersARequestAsThePhaseItWasSentIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &api{hang: 30 * time.Second, reqs: map[string]*[len(phases)]int{}}
		a.set(slow)
		serve := func(sentIn string) (int, time.Duration) {
			r := httptest.NewRequest(http.MethodGet, "/v1/current/lisbon", nil)
			r.Header.Set("X-Caller", "bare")
			if sentIn != "" {
				r.Header.Set(phaseHeader, sentIn)
			}
			w := httptest.NewRecorder()
			start := time.Now()
			a.current(w, r)
			return w.Code, time.Since(start)
		}
		if code, took := serve("0"); code != http.StatusOK || took != 2*time.Millisecond {
			t.Errorf("a healthy phase's request in the slow phase: %d after %v, want 200 after the API's 2ms", code, took)
		}
		if h, s := a.requests("bare", healthy), a.requests("bare", slow); h != 1 || s != 0 {
			t.Errorf("counted %d in the healthy phase, %d in the slow one; want 1, 0", h, s)
		}
		for _, bad := range []string{"", "4", "-1", "slow"} { // the API's phase
			if _, took := serve(bad); took != a.hang+2*time.Millisecond {
				t.Errorf("X-Phase %q in the slow phase: answered after %v, want the hang %v and the work", bad, took, a.hang)
			}
		}
		if s := a.requests("bare", slow); s != 4 {
			t.Errorf("%d requests without a valid X-Phase counted in the slow phase, want 4", s)
		}
	})
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Both services pass the user's X-Phase on to the API.
func TestServicePassesThePhaseOn(t *testing.T) {
	for _, mode := range modes {
		var got string
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.Header.Get(phaseHeader)
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}}, nil
		})}
		r := httptest.NewRequest(http.MethodGet, "/weather?city=lisbon", nil)
		r.Header.Set(phaseHeader, "2")
		w := httptest.NewRecorder()
		forecast(w, r, client, "http://api.test", mode)
		if w.Code != http.StatusOK || got != "2" {
			t.Errorf("%s: %d, the API got X-Phase %q; want 200, \"2\"", mode, w.Code, got)
		}
	}
}
