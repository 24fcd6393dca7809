package httpnames

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// HostProblem returns what is wrong with host as the key of a host ("" when
// nothing): a request's URL must be able to carry it as its host, so no
// scheme, path or user, a port 1-65535, and lower case (hosts compare
// without case; httpmw lower-cases a request's host before it looks it up).
func HostProblem(host string) string {
	const want = "want host[:port] as a request's URL writes it, such as api.weather.example or 127.0.0.1:8080"
	u, err := url.Parse("http://" + host)
	if err != nil || u.Host != host || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Hostname() == "" {
		return want
	}
	if strings.Contains(host, ":") && !strings.HasSuffix(host, "]") {
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			return want + "; the port must be a number 1-65535"
		}
	}
	if strings.ToLower(host) != host {
		return fmt.Sprintf("write the host in lower case (%s): hosts compare without case", strings.ToLower(host))
	}
	return ""
}

// PatternProblem returns what is wrong with a route's pattern before
// net/http reads it ("" when nothing): a pattern must be "[METHOD ]/path",
// with no host (the route's host is the key above it).
func PatternProblem(pattern string) string {
	rest := pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		rest = strings.TrimLeft(pattern[i+1:], " \t")
	}
	if !strings.HasPrefix(rest, "/") {
		return `want a net/http pattern "[METHOD ]/path" such as "GET /v1/current/{city}", with no host (the host is the key above it)`
	}
	return ""
}

// CheckRoutes registers the route patterns of one host, in order, on a
// scratch http.ServeMux, so that the standard library itself parses them
// and finds conflicts (two patterns that match the same requests), and
// reports each refusal, and each pattern [PatternProblem] refuses first.
// ServeMux refuses a pattern by panicking: the panic is recovered here, and
// nothing else is done under it.
func CheckRoutes(patterns []string, report func(pattern, problem string)) {
	mux := http.NewServeMux()
	for _, p := range patterns {
		if problem := PatternProblem(p); problem != "" {
			report(p, problem)
			continue
		}
		if problem := register(mux, p); problem != "" {
			report(p, problem)
		}
	}
}

// registeredAt is the part of net/http's conflict message that names the
// source line of a registration (here, this file's).
var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

// register registers pattern on mux, and returns net/http's refusal, if
// any, as a problem.
func register(mux *http.ServeMux, pattern string) (problem string) {
	defer func() {
		if r := recover(); r != nil {
			msg := registeredAt.ReplaceAllString(fmt.Sprint(r), "")
			msg = strings.ReplaceAll(strings.TrimSpace(msg), ":\n", ": ")
			msg = strings.ReplaceAll(msg, "\n", "; ")
			problem = "not a net/http ServeMux pattern: " + msg
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return ""
}
