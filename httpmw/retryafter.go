package httpmw

import (
	"net/http"
	"time"
)

// retryAfter reads a Retry-After header (RFC 9110 §10.2.3): a number of
// seconds, or an HTTP-date (a date already past is no wait). A header that
// is absent, sent more than once, or neither form is not read: the retry
// policy's own backoff applies.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	vs := h["Retry-After"]
	if len(vs) != 1 || vs[0] == "" {
		return 0, false
	}
	v := vs[0]
	if s, ok := seconds(v); ok {
		return s, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// maxRetryAfter bounds a delay in seconds: past it, time.Duration would
// overflow. No call waits that long: a wait longer than the call's deadline,
// or than the retry's bound on a server's wait (300s, docs/retry.md), ends
// the retries.
const maxRetryAfter = int64(1<<63-1) / int64(time.Second)

// seconds reads delay-seconds: one or more decimal digits, nothing else.
func seconds(v string) (time.Duration, bool) {
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (maxRetryAfter-int64(c-'0'))/10 {
			n = maxRetryAfter // a number too large to wait for
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return time.Duration(n) * time.Second, true
}
