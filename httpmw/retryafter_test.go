package httpmw_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

var now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func TestRetryAfterParses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		want   time.Duration
		ok     bool
	}{
		{"seconds", []string{"120"}, 120 * time.Second, true},
		{"zero", []string{"0"}, 0, true},
		{"an HTTP-date", []string{now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"an RFC 850 date", []string{now.Add(5 * time.Second).Format("Monday, 02-Jan-06 15:04:05 GMT")}, 5 * time.Second, true},
		{"a date past", []string{now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"a number too large to wait for", []string{"99999999999999999999999"}, time.Duration(1<<63-1) / time.Second * time.Second, true},
		{"absent", nil, 0, false},
		{"empty", []string{""}, 0, false},
		{"negative", []string{"-1"}, 0, false},
		{"a sign", []string{"+5"}, 0, false},
		{"a fraction", []string{"1.5"}, 0, false},
		{"spaces", []string{" 5"}, 0, false},
		{"words", []string{"soon"}, 0, false},
		{"twice", []string{"1", "2"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.values != nil {
				h["Retry-After"] = tc.values
			}
			got, ok := httpmw.RetryAfter(h, now)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("retryAfter(%q) = %v, %v; want %v, %v", tc.values, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// pushbackYAML retries 429 and 503 after 100ms, unless the server says
// otherwise.
const pushbackYAML = `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  timeout: { overall: 30s, perAttempt: 10s }
hosts:
  "{{host}}":
    retry: { maxAttempts: 2, initialBackoff: 100ms, jitter: 0, retryableStatusCodes: [429, 503] }
`

// A 429 or a 503 with Retry-After makes the next attempt wait what it says,
// in seconds or until an HTTP-date, instead of the backoff; a value that is
// neither leaves the backoff; a wait past the call's deadline ends the
// retries at once, and the caller gets the response.
func TestRetryAfterIsThePushback(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		wait       time.Duration // the retry's wait; 0: no retry
	}{
		{"503, seconds", 503, "2", 2 * time.Second},
		{"429, an HTTP-date", 429, now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second},
		{"503, not a delay", 503, "tomorrow", 100 * time.Millisecond},
		{"503, past the deadline", 503, "3600", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
				n++ // one request at a time
				if n == 1 {
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(tc.status)
					return
				}
				w.WriteHeader(200)
			})
			clock := resiliencetest.NewClock(now)
			obs := &resiliencetest.Observer{}
			chain := newChain(t, pushbackYAML, b.host, httpmw.WithClock(clock), httpmw.WithObserver(obs))
			tr, _ := newTransport(t)
			type result struct {
				status int
				err    error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := chain.Client(tr).Do(newRequest(t, http.MethodGet, b.URL, nil))
				if err == nil {
					resp.Body.Close()
					done <- result{resp.StatusCode, nil}
					return
				}
				done <- result{0, err}
			}()
			want := 200
			if tc.wait > 0 {
				clock.WaitPending(1) // the retry waits
				retries := obs.Events(resilience.EventRetry)
				if len(retries) != 1 || retries[0].Backoff != tc.wait {
					t.Errorf("retry events %+v, want one waiting %v", retries, tc.wait)
				}
				clock.Advance(tc.wait)
			} else {
				want = tc.status
			}
			r := <-done
			if r.err != nil || r.status != want {
				t.Fatalf("got %d, %v; want %d", r.status, r.err, want)
			}
		})
	}
}
