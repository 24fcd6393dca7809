package config

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/internal/httpnames"
)

// HTTP's scope: the hosts section, read by httpmw. Its status codes are HTTP
// status numbers; the defaults section's status codes are gRPC's, so in an
// HTTP scope the lists start from these defaults instead, and a hosts level
// may change them.
const (
	// StatusClientClosedRequest is the status an HTTP attempt counts as
	// when its caller gave up (its context was canceled): 499, nginx's
	// "Client Closed Request". It is in ignoredStatusCodes by default, as
	// gRPC's CANCELLED is: a caller that gave up says nothing about the
	// server.
	StatusClientClosedRequest = 499
)

var (
	// httpFailureCodes: an answer that says the server cannot serve. 501
	// Not Implemented is not one: the server works and says no. Transport
	// errors and timeouts are failures whatever the list says.
	httpFailureCodes = Codes{500, 502, 503, 504}
	httpIgnoredCodes = Codes{StatusClientClosedRequest}
	// httpRetryableCodes: answers another attempt may well not get: a
	// gateway that could not reach its upstream (502, 504) or a server
	// that sheds (503). A 500 is most often the request's own bug, the
	// same every time; a 429 asks the client to slow down. Transport errors
	// and attempt timeouts are retried too (they carry no status).
	httpRetryableCodes = Codes{502, 503, 504}
)

// builtinHTTP is builtin with HTTP's status codes.
func builtinHTTP() Policies {
	p := builtin()
	p.CircuitBreaker.FailureStatusCodes = httpFailureCodes
	p.CircuitBreaker.IgnoredStatusCodes = httpIgnoredCodes
	p.Retry.RetryableStatusCodes = httpRetryableCodes
	p.Hedging.NonFatalStatusCodes = httpRetryableCodes
	return p
}

// isHTTPStatus reports whether c is in HTTP's range of status numbers.
func isHTTPStatus(c codes.Code) bool { return c >= 100 && c <= 599 }

// withoutCodes returns p without its status codes: the defaults as an HTTP
// scope reads them.
func (p *Policies) withoutCodes() *Policies {
	q := *p
	if cb := q.CircuitBreaker; cb != nil {
		c := *cb
		c.FailureStatusCodes, c.IgnoredStatusCodes = nil, nil
		q.CircuitBreaker = &c
	}
	if r := q.Retry; r != nil {
		c := *r
		c.RetryableStatusCodes = nil
		q.Retry = &c
	}
	if h := q.Hedging; h != nil {
		c := *h
		c.NonFatalStatusCodes = nil
		q.Hedging = &c
	}
	return &q
}

// Route resolves the settings of route route of host host for an HTTP
// call: built-in defaults with HTTP's status codes → defaults (less their
// status codes, which are gRPC's) → host → route, field by field. Neither
// need be named by the configuration: a route it does not name has its
// host's settings, a host it does not name the defaults'. The configuration
// must be valid ([Config.Validate]).
func (c *Config) Route(host, route string) Method {
	var hp, rp *Policies
	hpath, rpath := Join("hosts", host), ""
	if h := c.Hosts[host]; h != nil {
		hp = &h.Policies
		rp = h.Routes[route]
		rpath = Join(hpath+".routes", route)
	}
	return resolveMethod(builtinHTTP, c.Defaults.withoutCodes(), level{hpath, hp}, level{rpath, rp}, host, route)
}

// checkHosts validates the hosts section: host names, route patterns, and
// every level as it resolves.
func (c *Config) checkHosts(failed map[string][]string, add func(path, problem string), addIn func(path, problem, in string)) {
	defaults := level{path: "defaults", p: c.Defaults.withoutCodes()}
	for _, host := range sortedNames(c.Hosts) {
		h := c.Hosts[host]
		hpath := Join("hosts", host)
		checkHostName(host, hpath, add)
		if h == nil {
			continue
		}
		hl := []level{defaults, {path: hpath, p: &h.Policies}}
		if kb := h.CircuitBreaker; kb != nil && kb.KeyBy != nil {
			checkKeyBy(*kb.KeyBy, hpath+".circuitBreaker.keyBy", add)
		}
		checkCodes(&h.Policies, hpath, true, add)
		checkNoDeadLetter(&h.Policies, hpath, add)
		checkLevelFrom(builtinHTTP, hl, hpath, failed, addIn)
		checkRoutes(h.Routes, hpath, add)
		keyBy := *resolve(hl...).CircuitBreaker.KeyBy
		for _, r := range sortedNames(h.Routes) {
			rp := h.Routes[r]
			if rp == nil {
				continue
			}
			rpath := Join(hpath+".routes", r)
			checkMethodLevel(rp, rpath, keyBy, add)
			checkCodes(rp, rpath, true, add)
			checkNoDeadLetter(rp, rpath, add)
			checkLevelFrom(builtinHTTP, append(hl, level{path: rpath, p: rp}), rpath, failed, addIn)
		}
	}
}

// checkNoDeadLetter refuses a deadLetter section in HTTP's scope: HTTP calls
// are not deferred yet, and a section that silently did nothing would leave
// a user believing their requests are kept. The defaults' deadLetter is
// gRPC's only (docs/deadletter.md).
func checkNoDeadLetter(p *Policies, path string, add func(path, problem string)) {
	if p.DeadLetter != nil {
		add(path+".deadLetter", "the dead-letter queue defers gRPC calls only; HTTP requests are not deferred (docs/deadletter.md)")
	}
}

// checkHostName refuses a host key that a request's URL cannot carry as its
// host (internal/httpnames), and the engine's name for unknown hosts.
func checkHostName(host, path string, add func(path, problem string)) {
	if host == otherName {
		add(path, otherName+" is the name of the entry unknown hosts share; it cannot be configured")
		return
	}
	if problem := httpnames.HostProblem(host); problem != "" {
		add(path, problem)
	}
}

// otherName is the engine's name for unknown keys (engine.Other).
const otherName = "_OTHER"

// checkRoutes reports each route pattern of a host that net/http refuses,
// or that conflicts with another of the host's (internal/httpnames).
func checkRoutes(routes map[string]*Policies, hpath string, add func(path, problem string)) {
	httpnames.CheckRoutes(sortedNames(routes), func(r, problem string) {
		add(Join(hpath+".routes", r), problem)
	})
}

// PatternProblem returns what is wrong with a route's pattern before
// net/http reads it ("" when nothing): a pattern must be "[METHOD ]/path",
// with no host (the route's host is the key above it).
func PatternProblem(pattern string) string { return httpnames.PatternProblem(pattern) }

// checkCodes refuses status codes of the wrong scope's kind: gRPC codes
// (0–16) at a gRPC level, HTTP status numbers (100–599) and no 2xx (a
// success) at an HTTP level. YAML cannot write them; a Config built in Go
// can.
func checkCodes(p *Policies, path string, http bool, add func(path, problem string)) {
	if p == nil {
		return
	}
	var lists []codeList
	if cb := p.CircuitBreaker; cb != nil {
		lists = append(lists, codeList{"circuitBreaker.failureStatusCodes", cb.FailureStatusCodes},
			codeList{"circuitBreaker.ignoredStatusCodes", cb.IgnoredStatusCodes})
	}
	if r := p.Retry; r != nil {
		lists = append(lists, codeList{"retry.retryableStatusCodes", r.RetryableStatusCodes})
	}
	if h := p.Hedging; h != nil {
		lists = append(lists, codeList{"hedging.nonFatalStatusCodes", h.NonFatalStatusCodes})
	}
	for _, l := range lists {
		for i, c := range l.cs {
			ep := path + "." + l.key + "[" + strconv.Itoa(i) + "]"
			switch {
			case http && !isHTTPStatus(c):
				add(ep, fmt.Sprintf("want an HTTP status number 100-599 under hosts, got %d", c))
			case http && c >= 200 && c <= 299:
				add(ep, fmt.Sprintf("%d is a success: it cannot be a failure, ignored, retried or hedged on", c))
			case !http && int(c) >= len(codeNames):
				add(ep, fmt.Sprintf("want a gRPC code (a name such as UNAVAILABLE, or 0-16) outside hosts, got %d", c))
			}
		}
	}
}

// codeList is one list of status codes of a level, and its key.
type codeList struct {
	key string
	cs  Codes
}

// parseHTTPCode reads an HTTP status number, 100–599.
func parseHTTPCode(s string) (codes.Code, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 || n > 599 {
		return 0, false
	}
	return codes.Code(n), true
}
