package httpmw

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/meshless/meshless/resilience"
)

// ReasonHeader is the response header in which a meshless server names the
// reason it rejected a request (resilience.ReasonBulkheadFull, …), beside
// the problem details of its body. A meshless client that gets a response
// with this header and the status the reason is sent with
// (resilience.Kind.HTTPStatus) reads it as a rejection one hop down: never
// retried nor hedged, and counted as the reason says
// (resilience.Kind.RelayedOutcome: an open breaker down the line is a
// failure of the service that relayed it, the others are ignored), at any
// number of hops, as long as each passes the response on.
const ReasonHeader = "Meshless-Rejection"

// ProblemType is the type of the RFC 9457 problem details a meshless server
// answers a rejected request with.
const ProblemType = "https://github.com/meshless/meshless/blob/main/docs/http.md#rejections-on-the-wire"

// relayed returns the kind of rejection a response names in ReasonHeader,
// when its status is the one that kind is sent with.
func relayed(resp *http.Response) resilience.Kind {
	vs := resp.Header[ReasonHeader]
	if len(vs) != 1 {
		return 0
	}
	if k, ok := resilience.KindOfReason(vs[0]); ok && k.HTTPStatus() == resp.StatusCode {
		return k
	}
	return 0
}

// RejectionReason returns the reason of the meshless rejection err carries
// (resilience.ReasonCircuitOpen, ReasonBulkheadFull, ReasonRateLimited,
// ReasonThrottled, ReasonDeferred), or "" for any other error. A
// RoundTripper's local rejections are such errors; a rejection relayed by a
// server is a response, whose ReasonHeader names it.
func RejectionReason(err error) string {
	if r, ok := resilience.AsRejection(err); ok {
		return r.RejectedBy().Reason()
	}
	return ""
}

// WriteRejection answers w as a meshless server answers a request it
// rejects, when err is a meshless rejection (a client's, from a handler's
// call to its own backend): the status of its reason (503, 429 for a rate
// limiter), Retry-After: 1, ReasonHeader, and an RFC 9457
// application/problem+json body that names the reason. It reports whether
// it wrote; for any other error it writes nothing.
func WriteRejection(w http.ResponseWriter, err error) bool {
	r, ok := resilience.AsRejection(err)
	if !ok || r.RejectedBy().Reason() == "" {
		return false
	}
	writeRejection(w, r.RejectedBy(), "1")
	return true
}

// writeRejection writes the rejection of kind k.
func writeRejection(w http.ResponseWriter, k resilience.Kind, retryAfter string) {
	h := w.Header()
	h["Content-Type"] = problemContentType
	h["Retry-After"] = []string{retryAfter}
	h[ReasonHeader] = []string{k.Reason()}
	w.WriteHeader(k.HTTPStatus())
	w.Write(problems[k]) //nolint:errcheck // the client went away: nothing to do
}

var problemContentType = []string{"application/problem+json"}

// problem is an RFC 9457 problem details object, with the reason as an
// extension member.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Reason string `json:"reason"`
}

// problems are the bodies of the rejections, one per kind that has a
// reason, made once.
var problems = func() map[resilience.Kind][]byte {
	out := map[resilience.Kind][]byte{}
	for k := resilience.Kind(0); k < 64; k++ {
		if k.Reason() == "" {
			continue
		}
		b, _ := json.Marshal(problem{Type: ProblemType, Title: http.StatusText(k.HTTPStatus()), Status: k.HTTPStatus(),
			Detail: "meshless: the " + strings.ReplaceAll(k.String(), "_", " ") + " rejected the request (" + k.Reason() + "); retry after Retry-After",
			Reason: k.Reason()})
		out[k] = append(b, '\n')
	}
	return out
}()

// ErrNotReplayable is matched (errors.Is) by the error of a call that its
// route would have retried or hedged, but whose request may not be sent
// twice: its method is not idempotent and it has no Idempotency-Key header,
// or its body cannot be replayed (Request.GetBody is nil). The error
// unwraps to the attempt's own.
var ErrNotReplayable = errors.New("httpmw: the request may not be sent twice")

// notReplayableError says why a failed call was not retried.
type notReplayableError struct {
	why string
	err error
}

func (e *notReplayableError) Error() string { return "httpmw: " + e.why + ": " + e.err.Error() }

func (e *notReplayableError) Unwrap() error { return e.err }

func (e *notReplayableError) Is(target error) bool { return target == ErrNotReplayable }

// Timeout reports whether the attempt's error was a timeout, so that a
// net.Error check sees through the wrapping.
func (e *notReplayableError) Timeout() bool {
	t, ok := e.err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// retryAfterValue writes d as Retry-After's delay-seconds, rounded up.
func retryAfterValue(d int64) string { return strconv.FormatInt(d, 10) }
