package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// phase is how the stand-in weather API answers for a while.
type phase int

const (
	healthy   phase = iota // answers in a few milliseconds
	slow                   // holds each request for -hang, unless the client gives up first
	failing                // answers 503 Service Unavailable at once
	recovered              // healthy again
)

var phases = [...]string{"healthy", "slow", "failing", "recovered"}

func (p phase) String() string { return phases[p] }

// api is a local stand-in for a weather API: GET /v1/current/{city}
// answers a small JSON forecast, or fails or hangs as its phase says. It
// counts the requests of each caller (the X-Caller header) per phase.
//
// A request's phase is the one its user sent it in (the X-Phase header,
// which the services pass on), not the one the API is in when it arrives:
// a request sent just before a phase ends can reach the API after the next
// one began (a busy machine, a retry), and answered by the next phase it
// would show as a give-up or a failure its own phase did not have.
type api struct {
	srv   *httptest.Server
	hang  time.Duration
	phase atomic.Int32
	mu    sync.Mutex
	reqs  map[string]*[len(phases)]int
}

func newAPI(hang time.Duration) *api {
	a := &api{hang: hang, reqs: map[string]*[len(phases)]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/current/{city}", a.current)
	a.srv = httptest.NewServer(mux)
	return a
}

func (a *api) set(p phase) { a.phase.Store(int32(p)) }

// phaseHeader carries, from the user through the service to the API, the
// phase the user sent its request in.
const phaseHeader = "X-Phase"

// phaseOf is the phase r was sent in: its X-Phase header if that names a
// phase, else the API's current one.
func (a *api) phaseOf(r *http.Request) phase {
	if p, err := strconv.Atoi(r.Header.Get(phaseHeader)); err == nil && p >= 0 && p < len(phases) {
		return phase(p)
	}
	return phase(a.phase.Load())
}

func (a *api) current(w http.ResponseWriter, r *http.Request) {
	p := a.phaseOf(r)
	a.mu.Lock()
	counts := a.reqs[r.Header.Get("X-Caller")]
	if counts == nil {
		counts = new([len(phases)]int)
		a.reqs[r.Header.Get("X-Caller")] = counts
	}
	counts[p]++
	a.mu.Unlock()
	switch p {
	case slow:
		t := time.NewTimer(a.hang)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up
			return
		}
	case failing:
		http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
		return
	}
	time.Sleep(2 * time.Millisecond) // the API's own work
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"city":%q,"tempC":21}`, r.PathValue("city"))
}

// requests returns the requests caller sent in phase p.
func (a *api) requests(caller string, p phase) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.reqs[caller]; c != nil {
		return c[p]
	}
	return 0
}
