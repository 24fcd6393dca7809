package httpmw

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/timeout"
)

// transport is HTTP for the engine: an attempt's status is its response's
// (a *statusError carries it), a caller that gave up counts as 499, a
// transport error or a timeout carries no status (a failure, retryable:
// engine.Options.RetryUncoded), a rejection relayed from a meshless server
// one hop down is read from ReasonHeader.
type transport struct{}

// statusError is an attempt that got a response whose status is not 2xx.
// It is internal: the caller gets the response itself, never this error.
type statusError struct {
	resp    *http.Response
	status  int
	n       int             // the attempt that got it
	relayed resilience.Kind // a meshless rejection one hop down; 0 if none
}

func (e *statusError) Error() string { return "HTTP " + statusText(e.status) }

// statusOf returns the statusError err carries, following Unwrap.
func statusOf(err error) *statusError {
	for err != nil {
		switch e := err.(type) {
		case *statusError:
			return e
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

func (transport) Code(err error) (uint32, bool) {
	if se := statusOf(err); se != nil {
		return uint32(se.status), true
	}
	if re := (*requestError)(nil); errors.As(err, &re) {
		return config.StatusClientClosedRequest, true // the caller's side: its request's body
	}
	if errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// The caller's. A timeout that cut a cancelled request (a hedged
		// copy the hedge's cancel reached at the deadline, before its own
		// timer) is the timeout's: a failure, as any timeout.
		return config.StatusClientClosedRequest, true
	}
	return 0, false
}

var _ engine.Classer = transport{} // its statuses have classes (RFC 9110)

// Class reads a status no one registered as the x00 of its class, and
// one outside 100–599 as 500 (RFC 9110 §15: a client that receives a
// status it does not recognize treats it as the x00 of its class, an
// invalid one as a 5xx) when no list names the status itself: a CDN's 521
// in front of a backend that is down, or a 599, is a 500 to the breaker
// and the retry. 499, the status a call whose caller gave up counts as,
// stands for itself.
func (transport) Class(code uint32) (uint32, bool) {
	switch {
	case code == config.StatusClientClosedRequest:
		return 0, false
	case code < 100 || code > 599:
		// 600–999 from an HTTP/1 status line; any integer (a negative one
		// wraps) from HTTP/2's :status or from the wrapped RoundTripper.
		return http.StatusInternalServerError, true
	case code >= 100 && code < 600 && http.StatusText(int(code)) == "":
		return code / 100 * 100, true
	}
	return 0, false
}

func (transport) Relayed(err error) (resilience.Kind, bool) {
	if se := statusOf(err); se != nil && se.relayed != 0 {
		return se.relayed, true
	}
	return 0, false
}

// Overloaded: 429 Too Many Requests and 503 Service Unavailable, a server
// that sheds (or a meshless one hop down that rejected).
func (transport) Overloaded(err error) bool {
	se := statusOf(err)
	return se != nil && (se.status == http.StatusTooManyRequests || se.status == http.StatusServiceUnavailable)
}

// ErrorType names a call's error as OpenTelemetry's HTTP conventions do:
// the status code of a response ("503"), else a low-cardinality name of the
// transport error. A status outside 100–599 (HTTP/2 reads :status as any
// integer) is "_OTHER": the server does not choose the set of values.
func (transport) ErrorType(err error) string {
	if se := statusOf(err); se != nil {
		if se.status < 100 || se.status > 599 {
			return otherErrorType
		}
		return statusText(se.status)
	}
	var dns *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var record tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded): // before Canceled: a timeout that cut a cancelled request (Code)
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &dns):
		return "dns"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection_reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_closed"
	case errors.As(err, &certInvalid), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &record):
		return "tls"
	}
	return "transport"
}

// Rejection: a local rejection reaches the caller as the policy's own
// error (errors.Is with its sentinel; resilience.Rejection).
func (transport) Rejection(err error) error { return err }

// Final: a response of 100–399 is no error for the call; a timeout is a
// net.Error whose Timeout is true. A status below 100 is invalid, a 500 to
// the breaker (Class): the call's event records it as a failure too.
func (transport) Final(err error) error {
	if se, ok := err.(*statusError); ok && se.status >= 100 && se.status < 400 {
		return nil
	}
	if te, ok := err.(*timeout.Error); ok {
		return &timeoutError{te}
	}
	return err
}

// Mark does nothing: HTTP has no header that counts the attempts before
// this one, and setting one would copy the caller's headers per retry.
func (transport) Mark(ctx context.Context, _ int) context.Context { return ctx }

// timeoutError is a meshless timeout as an HTTP client's caller reads
// one: a net.Error whose Timeout is true (url.Error.Timeout, os.IsTimeout),
// which errors.Is matches with context.DeadlineExceeded and
// timeout.ErrTimeout.
type timeoutError struct{ err *timeout.Error }

func (e *timeoutError) Error() string   { return e.err.Error() }
func (e *timeoutError) Unwrap() error   { return e.err }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// statusTexts are the decimal strings of the status numbers, made once.
var statusTexts = func() (s [600]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusText(code int) string {
	if code >= 0 && code < len(statusTexts) {
		return statusTexts[code]
	}
	return strconv.Itoa(code)
}

// otherErrorType is OpenTelemetry's fallback value of error.type.
const otherErrorType = "_OTHER"
