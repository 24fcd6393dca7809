package httpmw

import (
	"net/http"
	"strings"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/internal/engine"
)

// OtherRoute is the name under which a chain keeps the policies of what its
// configuration does not name: a request to a configured host that matches
// none of its routes runs with the host's entry ("host/_OTHER": the host's
// settings), and a request to any other host with the one entry every
// unknown host shares ("_OTHER/_OTHER": the defaults). Nothing is created
// per host or path that arrives from outside, so nothing grows with them.
const OtherRoute = engine.Other

// router finds a request's key from its host and path, as a configuration
// names them. It is built from one configuration and never changes.
type router struct {
	hosts map[string]*hostRoutes
}

// hostRoutes are one configured host's routes: a ServeMux on which each
// route's pattern is registered, so that the standard library's own
// matching picks a request's route.
type hostRoutes struct {
	own      *route // the host's own entry, for a request no route matches
	mux      *http.ServeMux
	patterns map[string]*route
}

// route is one entry of the engine's table: its key, and the settings it
// resolves to. It is the handler registered for its pattern (never served).
type route struct {
	key    string // "/host/pattern", "/host/_OTHER" or "/_OTHER/_OTHER"
	names  func(*config.Config) (group, name string, known bool)
	hedges string // a method besides GET and HEAD the route hedges ("": none)
}

func (*route) ServeHTTP(http.ResponseWriter, *http.Request) {}

// unknownHost is the entry unknown hosts share.
var unknownHost = &route{
	key:   "/" + OtherRoute + "/" + OtherRoute,
	names: func(*config.Config) (string, string, bool) { return OtherRoute, OtherRoute, false },
}

// newRouter builds the router of a valid configuration.
func newRouter(cfg *config.Config) *router {
	r := &router{hosts: make(map[string]*hostRoutes, len(cfg.Hosts))}
	for host, h := range cfg.Hosts {
		hr := &hostRoutes{own: newRoute(host, OtherRoute), mux: http.NewServeMux(), patterns: map[string]*route{}}
		if h != nil {
			for pattern, p := range h.Routes {
				rt := newRoute(host, pattern)
				if i := strings.IndexAny(pattern, " \t"); i > 0 && p != nil && p.Hedging != nil {
					if method := pattern[:i]; method != http.MethodGet && method != http.MethodHead {
						rt.hedges = method // the route asks for it by name
					}
				}
				hr.mux.Handle(pattern, rt) // validated: the patterns parse and do not conflict
				hr.patterns[pattern] = rt
			}
		}
		r.hosts[host] = hr
	}
	return r
}

// newRoute returns the entry of route name of host (OtherRoute: the host's
// own). Its names read the configuration the engine holds, not the one the
// router was built from: a request matched by the router of the
// configuration a reload is replacing, after the engine took the new one,
// gets the entry the new one gives it (its host's own for a route it
// removed, the unknown hosts' for a host it removed), never one for a
// route no configuration in force names.
func newRoute(host, name string) *route {
	return &route{key: "/" + host + "/" + name,
		names: func(cfg *config.Config) (string, string, bool) {
			if name == OtherRoute {
				_, named := cfg.Hosts[host] // nil in a Config built in Go: named all the same
				return host, name, named
			}
			return host, name, transport{}.Names(cfg, host, name)
		}}
}

// match returns the entry of req: its host's route whose pattern matches
// it, else its host's own entry, else the unknown hosts' entry.
func (r *router) match(req *http.Request) *route {
	h := r.hosts[hostOf(req)]
	switch {
	case h == nil:
		return unknownHost
	case req.URL == nil:
		return h.own // no path to match; the transport refuses the request
	}
	handler, pattern := h.mux.Handler(req)
	if rt, ok := handler.(*route); ok {
		return rt
	}
	if rt, ok := h.patterns[pattern]; ok {
		return rt // a path the mux would redirect to its clean form
	}
	return h.own
}

// hostOf returns the host of a request as its URL writes it (a server's
// request: its Host header), lower-cased.
func hostOf(req *http.Request) string {
	host := req.Host
	if req.URL != nil && req.URL.Host != "" {
		host = req.URL.Host
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(host)
		}
	}
	return host
}

// Names reports whether cfg names route name of host (engine.Namer): a
// route its host's routes no longer list, or of a host cfg no longer
// lists, is no longer matched, and a reload closes the breaker and the
// bulkhead it kept for it alone.
func (transport) Names(cfg *config.Config, host, name string) bool {
	h := cfg.Hosts[host]
	if h == nil {
		return false
	}
	_, ok := h.Routes[name]
	return ok
}
