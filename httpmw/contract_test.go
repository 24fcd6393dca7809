package httpmw_test

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
)

// bodies hands out request bodies and counts how often each is closed.
type bodies struct {
	mu  sync.Mutex
	all []*closeCounter
}

func (b *bodies) next() *closeCounter {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &closeCounter{Reader: strings.NewReader("payload")}
	b.all = append(b.all, c)
	return c
}

func (b *bodies) closes() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int64
	for _, c := range b.all {
		out = append(out, c.closed.Load())
	}
	return out
}

// RoundTrip keeps http.RoundTripper's contract on every path: the caller's
// request is never modified, and every body it hands out (the request's
// own, each one GetBody made) is closed exactly once.
func TestTheRoundTripperContract(t *testing.T) {
	forcedOpen := `
defaults:
  circuitBreaker: { mode: FORCED_OPEN }
`
	for _, tc := range []struct {
		name     string
		yaml     string
		statuses []int
		closed   bool // the server is gone: a transport error
		want     int  // the status, 0 for an error
		bodies   int  // the bodies handed out
		wantErr  error
	}{
		{name: "one attempt", yaml: retry3, statuses: []int{200}, want: 200, bodies: 1},
		{name: "retried twice", yaml: retry3, statuses: []int{503, 502, 200}, want: 200, bodies: 3},
		{name: "retried twice, no timeouts", yaml: retry3 + "  timeout: { enabled: false }\n", statuses: []int{503, 502, 200}, want: 200, bodies: 3},
		{name: "retries spent", yaml: retry3, statuses: []int{503}, want: 503, bodies: 3},
		{name: "a transport error, retried", yaml: retry3, closed: true, bodies: 3},
		{name: "refused by the breaker", yaml: forcedOpen, statuses: []int{200}, bodies: 1, wantErr: circuitbreaker.ErrOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h http.HandlerFunc = func(http.ResponseWriter, *http.Request) {}
			if tc.statuses != nil {
				h, _ = script(tc.statuses...)
			}
			b := newBackend(t, h)
			url := b.URL + "/r"
			if tc.closed {
				b.Close()
			}
			chain := newChain(t, tc.yaml, b.host)
			tr, _ := newTransport(t)
			var bs bodies
			req := newRequest(t, http.MethodPut, url, nil)
			req.Body = bs.next()
			req.GetBody = func() (io.ReadCloser, error) { return bs.next(), nil }
			req.ContentLength = int64(len("payload"))
			req.Header.Set("X-Mine", "kept")
			before := *req
			header := req.Header.Clone()
			status, _, err := do(t, chain.Client(tr), req)
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			case tc.want != 0 && (err != nil || status != tc.want):
				t.Fatalf("got %d, %v; want %d", status, err, tc.want)
			case tc.want == 0 && err == nil:
				t.Fatalf("got %d, want an error", status)
			}
			// The client read the body after RoundTrip returned; every body
			// went to a transport that closes it, or was closed here.
			if got := bs.closes(); len(got) != tc.bodies || slices.ContainsFunc(got, func(n int64) bool { return n != 1 }) {
				t.Errorf("bodies closed %v times, want %d bodies closed once each", got, tc.bodies)
			}
			if req.Method != before.Method || req.URL != before.URL || req.Body != before.Body || req.Context() != before.Context() ||
				req.ContentLength != before.ContentLength || !maps.EqualFunc(req.Header, header, slices.Equal[[]string]) {
				t.Errorf("the request changed: %+v, was %+v", req, before)
			}
		})
	}
	_ = httpmw.ErrNotReplayable
}
