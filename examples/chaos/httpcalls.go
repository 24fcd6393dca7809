// This file holds the backend scenario over HTTP (-transport http): the
// backend's handler, answering as its gRPC method does, and the clients'
// requests — a plain net/http client with a deadline per call beside one
// whose transport httpmw wraps, from the same client.yaml.

package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
)

// The backend scenario's transports.
const (
	transportGRPC = "grpc"
	transportHTTP = "http"
)

// The paths the HTTP clients ask for: an item that exists, and one that
// does not (a 404, the business answer NOT_FOUND is on gRPC).
const (
	pathFound   = "/v1/items/1"
	pathMissing = "/v1/items/0"
	httpHost    = "backend.chaos" // the requests' host: client.yaml's defaults apply to it
)

// unavailable is how the backend says it cannot serve: UNAVAILABLE, or
// over HTTP 503.
func (c config) unavailable() string {
	if c.Transport == transportHTTP {
		return "503"
	}
	return "UNAVAILABLE"
}

// ServeHTTP answers as UnaryCall does, in HTTP: 503 while failing or
// shedding (429 with Retry-After for -shed pushback), nothing until the
// client gives up while hanging, 404 for a missing item, 200 otherwise.
func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := b.arrive()
	defer b.inflight.Add(-1)
	switch behaviour(b.mode.Load()) {
	case failing:
		http.Error(w, msgDown, http.StatusServiceUnavailable)
		return
	case hanging:
		<-r.Context().Done()
		return
	}
	if err := b.serve(r.Context()); err != nil {
		if status.Code(err) == codes.ResourceExhausted {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(b.cap.pushback().Round(time.Second).Seconds()))))
			http.Error(w, msgOverloaded, http.StatusTooManyRequests)
			return
		}
		http.Error(w, msgOverloaded, http.StatusServiceUnavailable)
		return
	}
	if f := int64(b.cap.FailEvery); f > 0 && n%f == 0 {
		http.Error(w, msgFlaky, http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path == pathMissing {
		http.Error(w, msgNotFound, http.StatusNotFound)
		return
	}
	_, _ = io.WriteString(w, `{"item":1}`)
}

// httpClients makes the scenario's two HTTP clients of backends bs (one
// each): bare, and through an httpmw chain built from cfg.Client.
func httpClients(cfg config, obs resilience.Observer, bs []*backend) ([]*http.Client, error) {
	chain, err := httpmw.New(cfg.Client, httpmw.WithObserver(obs))
	if err != nil {
		return nil, err
	}
	var cs []*http.Client
	for i, b := range bs {
		base := http.RoundTripper(&http.Transport{DialContext: b.dial, MaxIdleConnsPerHost: 1024, ForceAttemptHTTP2: false})
		base = countRequests{base}
		if i == 1 {
			base = chain.RoundTripper(base)
		}
		cs = append(cs, &http.Client{Transport: base})
	}
	return cs, nil
}

// countRequests counts each request that goes out to the backend: once per
// attempt, after every policy of the chain let it through.
type countRequests struct{ next http.RoundTripper }

func (c countRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	if n, ok := r.Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// get makes one HTTP call and returns what it meant as the gRPC client's
// error would: nil for a 200, NOT_FOUND for a 404, UNAVAILABLE for another
// answer, the client's error (a meshless rejection, a deadline) as it is.
func get(ctx context.Context, c *http.Client, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpHost+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
		return status.Error(codes.NotFound, msgNotFound)
	}
	return status.Error(codes.Unavailable, resp.Status)
}
