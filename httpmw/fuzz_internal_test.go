package httpmw

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

// FuzzRetryAfter: whatever a server sends in Retry-After, reading it never
// panics, and a delay read is never negative nor past maxRetryAfter
// seconds; seconds and HTTP-dates written by their own encoders read back.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"0", "120", "-1", "+5", " 5", "1.5", "soon", "", "99999999999999999999999",
		"9223372036", "9223372037", now.Add(90 * time.Second).Format(http.TimeFormat), "Monday, 02-Jan-06 15:04:05 GMT",
		"Mon Jan  2 15:04:05 2006", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT"} {
		f.Add(v, now.Unix(), int64(120))
	}
	f.Fuzz(func(t *testing.T, v string, unix, secs int64) {
		now := time.Unix(unix, 0)
		d, ok := retryAfter(http.Header{"Retry-After": {v}}, now)
		if !ok && d != 0 {
			t.Fatalf("retryAfter(%q) = %v, false", v, d)
		}
		if d < 0 || d > time.Duration(maxRetryAfter)*time.Second && d != time.Duration(1<<63-1) {
			t.Fatalf("retryAfter(%q) = %v, out of bounds", v, d)
		}
		if _, ok := retryAfter(http.Header{"Retry-After": {v, v}}, now); ok {
			t.Fatalf("retryAfter read %q sent twice", v)
		}
		if secs >= 0 && secs <= maxRetryAfter {
			if got, ok := retryAfter(http.Header{"Retry-After": {retryAfterValue(secs)}}, now); !ok || got != time.Duration(secs)*time.Second {
				t.Fatalf("Retry-After %d reads as %v, %v", secs, got, ok)
			}
		}
		if y := now.UTC().Year(); y >= 1 && y <= 9999 && secs >= 0 && secs <= 1e9 {
			at := now.Add(time.Duration(secs) * time.Second)
			if y := at.UTC().Year(); y > 9999 {
				return
			}
			if got, ok := retryAfter(http.Header{"Retry-After": {at.UTC().Format(http.TimeFormat)}}, now); !ok || got != time.Duration(secs)*time.Second {
				t.Fatalf("Retry-After %s (now %v) reads as %v, %v", at.UTC().Format(http.TimeFormat), now, got, ok)
			}
		}
	})
}

// FuzzRelayed: whatever a response names in ReasonHeader, reading it never
// panics, and a kind read is one whose reason the header names and whose
// status the response has; what writeRejection writes reads back as its
// kind, with a problem+json body that names its reason.
func FuzzRelayed(f *testing.F) {
	for _, r := range []string{resilience.ReasonCircuitOpen, resilience.ReasonBulkheadFull, resilience.ReasonRateLimited,
		resilience.ReasonThrottled, resilience.ReasonDeferred, "", "circuit_open", "X"} {
		f.Add(r, 503, false, uint8(0))
		f.Add(r, 429, true, uint8(0))
	}
	f.Fuzz(func(t *testing.T, reason string, code int, twice bool, kind uint8) {
		resp := &http.Response{StatusCode: code, Header: http.Header{ReasonHeader: {reason}}}
		if twice {
			resp.Header[ReasonHeader] = append(resp.Header[ReasonHeader], reason)
		}
		if k := relayed(resp); k != 0 && (twice || k.Reason() != reason || k.HTTPStatus() != code) {
			t.Fatalf("relayed(%d, %q) = %v", code, reason, k)
		}
		k := resilience.Kind(kind % 64)
		if k.Reason() == "" {
			return
		}
		w := httptest.NewRecorder()
		writeRejection(w, k, "1")
		if got := relayed(w.Result()); got != k {
			t.Fatalf("a rejection of %v reads back as %v", k, got)
		}
		var p problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Reason != k.Reason() || p.Status != w.Code || p.Type != ProblemType {
			t.Fatalf("the problem of %v: %s, %v", k, w.Body.Bytes(), err)
		}
		if got, ok := retryAfter(w.Result().Header, time.Now()); !ok || got != time.Second {
			t.Fatalf("the Retry-After of a rejection reads as %v, %v", got, ok)
		}
	})
}
