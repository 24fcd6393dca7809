package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// phase is how the stand-in weather API answers for a while.
type phase int

const (
	healthy phase = iota // answers in a few milliseconds
	failing              // answers 503 Service Unavailable
	hanging              // does not answer until the client gives up
)

func (p phase) String() string { return [...]string{"healthy", "failing", "hanging"}[p] }

// api is a local stand-in for a weather API: GET /forecast?city=NAME answers
// a small JSON forecast, 404 for a city it does not know, and fails or hangs
// as its phase says.
type api struct {
	srv      *httptest.Server
	phase    atomic.Int32
	requests atomic.Int64 // requests that reached the API
}

func newAPI() *api {
	a := &api{}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

func (a *api) set(p phase) { a.phase.Store(int32(p)) }

func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	switch phase(a.phase.Load()) {
	case failing:
		http.Error(w, "upstream overloaded", http.StatusServiceUnavailable)
		return
	case hanging:
		<-r.Context().Done() // the client gave up
		return
	}
	city := r.URL.Query().Get("city")
	if city == "Atlantis" {
		http.Error(w, "no such city", http.StatusNotFound)
		return
	}
	time.Sleep(2 * time.Millisecond) // the API's own work
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"city":%q,"tempC":21}`, city)
}
