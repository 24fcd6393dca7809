package otelmw

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/meshless/meshless/internal/httpcall"
	"github.com/meshless/meshless/resilience"
)

// OpenTelemetry's HTTP semantic conventions: the attributes of an HTTP
// call's meshless.call.duration.
const (
	attrHTTPMethod  = attribute.Key("http.request.method")
	attrHTTPStatus  = attribute.Key("http.response.status_code")
	attrServerPort  = attribute.Key("server.port")
	attrURLTemplate = attribute.Key("url.template")
)

// HTTPScope is the Scope of the resilience.Source of an HTTP client's
// logical calls (resilience.KindCall), as httpmw attaches it (its
// CallScope): the source's Name is "host/route" — host[:port] as the
// configuration names it, route its net/http pattern; "_OTHER" for what the
// configuration does not name.
const HTTPScope = "http"

// HTTPCall is implemented by the context an HTTP client passes with each
// call's event (httpmw's does): the request's method and the status of the
// response the call returned. httpmw's call is also found behind the
// contexts that wrap it (observe mode's mark, an overall deadline), for its
// call durations and for the error.type of its retries' and hedges' span
// events.
type HTTPCall interface {
	// HTTPRequestMethod returns the request's method ("GET").
	HTTPRequestMethod() string
	// HTTPResponseStatusCode returns the status of the response a call that
	// ended with err returned (err nil: its successful response), or 0 when
	// it returned none.
	HTTPResponseStatusCode(err error) int
}

// httpMethods are the methods OpenTelemetry's conventions know; any other
// is recorded as "_OTHER".
var httpMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", otherValue}

// maxHTTPSets bounds the attribute sets of one route's calls (method ×
// status × error.type); past it, a call is recorded with method and
// error.type "_OTHER" and no status.
const maxHTTPSets = 256

// maxUnregistered bounds the statuses no one registered (http.StatusText
// knows none: 432, 521, 599, ...) that one route's calls record as
// themselves; past it, such a status is recorded with no status and
// error.type "_OTHER", so that a server answering with them cannot spend
// the route's maxHTTPSets.
const maxUnregistered = 16

// httpCallRecorder records the duration of one route's logical HTTP calls,
// with OpenTelemetry's HTTP attributes: http.request.method, server.address
// and server.port (the configured host), url.template (the route's pattern,
// never a path), http.response.status_code, error.type.
type httpCallRecorder struct {
	o    *Observer
	base []attribute.KeyValue
	mu   sync.Mutex
	sets atomic.Pointer[map[httpKey][]metric.RecordOption] // copy on write, under mu
	// unregistered holds the statuses no one registered recorded as
	// themselves, at most maxUnregistered; under mu.
	unregistered map[uint16]bool
}

type httpKey struct {
	method    uint8 // index in httpMethods; len(httpMethods) when unknown
	status    uint16
	errorType string
}

func newHTTPCallRecorder(o *Observer, name string) *httpCallRecorder {
	host, route, _ := strings.Cut(name, "/")
	var base []attribute.KeyValue
	if addr, port, err := net.SplitHostPort(host); err == nil {
		base = append(base, attrServerAddress.String(addr))
		if p, err := strconv.Atoi(port); err == nil {
			base = append(base, attrServerPort.Int(p))
		}
	} else if host != "" {
		base = append(base, attrServerAddress.String(host))
	}
	if route != "" && route != otherValue {
		// The pattern's path: its method, if any, is http.request.method.
		if i := strings.IndexAny(route, " \t"); i >= 0 {
			route = strings.TrimLeft(route[i+1:], " \t")
		}
		base = append(base, attrURLTemplate.String(route))
	}
	r := &httpCallRecorder{o: o, base: base}
	r.sets.Store(&map[httpKey][]metric.RecordOption{})
	return r
}

func (r *httpCallRecorder) Record(ctx context.Context, e resilience.Event) {
	if e.Type != resilience.EventCall {
		return
	}
	k := httpKey{method: uint8(len(httpMethods)), errorType: e.ErrorType}
	if k.errorType == "" && e.Err != nil || outOfRange(k.errorType) {
		// A failed call its sender did not name, or a status number no
		// HTTP status has (from the server: it may not spend the bound).
		k.errorType = otherValue
	}
	if hc, ok := httpCallOf(ctx); ok {
		k.method = methodIndex(hc.HTTPRequestMethod())
		if s := hc.HTTPResponseStatusCode(e.Err); s >= 100 && s <= 599 {
			k.status = uint16(s)
			if http.StatusText(s) == "" && !r.keeps(k.status) {
				// A status no one registered, past the route's few: from
				// the server, it may not spend the bound either.
				k.status = 0
				if n, err := strconv.Atoi(k.errorType); err == nil && n == s {
					k.errorType = otherValue
				}
			}
		}
	}
	r.o.callDuration.Record(ctx, e.Duration.Seconds(), r.opts(k)...)
}

// keeps reports whether s, a status no one registered, is recorded as
// itself: one of the first maxUnregistered such statuses of the route.
func (r *httpCallRecorder) keeps(s uint16) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unregistered[s] {
		return true
	}
	if len(r.unregistered) >= maxUnregistered {
		return false
	}
	if r.unregistered == nil {
		r.unregistered = map[uint16]bool{}
	}
	r.unregistered[s] = true
	return true
}

// httpCallOf returns the HTTPCall of an HTTP call's event: ctx itself, or
// the call behind the contexts that wrap it (observe mode marks the call's
// context with a value of its own), found by internal/httpcall's key.
func httpCallOf(ctx context.Context) (HTTPCall, bool) {
	if hc, ok := ctx.(HTTPCall); ok {
		return hc, true
	}
	hc, ok := ctx.Value(httpcall.Key{}).(HTTPCall)
	return hc, ok
}

// outOfRange reports whether t is a number outside HTTP's 100–599.
func outOfRange(t string) bool {
	if t == "" || t[0] < '0' || t[0] > '9' {
		return false
	}
	n, err := strconv.Atoi(t)
	return err != nil || n < 100 || n > 599
}

func methodIndex(m string) uint8 {
	for i, known := range httpMethods[:len(httpMethods)-1] {
		if m == known {
			return uint8(i)
		}
	}
	return uint8(len(httpMethods) - 1) // _OTHER
}

// opts returns the option slice of k, built on its first call.
func (r *httpCallRecorder) opts(k httpKey) []metric.RecordOption {
	if opts, ok := (*r.sets.Load())[k]; ok {
		return opts
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := *r.sets.Load()
	if opts, ok := cur[k]; ok {
		return opts
	}
	if len(cur) >= maxHTTPSets {
		over := httpKey{method: uint8(len(httpMethods) - 1)}
		if k.errorType != "" {
			over.errorType = otherValue
		}
		k = over
		if opts, ok := cur[k]; ok {
			return opts
		}
	}
	extra := make([]attribute.KeyValue, 0, 3)
	if int(k.method) < len(httpMethods) {
		extra = append(extra, attrHTTPMethod.String(httpMethods[k.method]))
	}
	if k.status != 0 {
		extra = append(extra, attrHTTPStatus.Int(int(k.status)))
	}
	if k.errorType != "" {
		extra = append(extra, attrErrorType.String(k.errorType))
	}
	opts := recordOpts(r.base, extra...)
	next := make(map[httpKey][]metric.RecordOption, len(cur)+1)
	for key, v := range cur {
		next[key] = v
	}
	next[k] = opts
	r.sets.Store(&next)
	return opts
}
