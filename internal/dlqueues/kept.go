package dlqueues

import (
	"strings"

	"github.com/meshless/meshless/config"
)

// A GroupNamer is a transport that tells whether a group the configuration
// does not write has methods it names all the same (gRPC: a service whose
// descriptor is linked into the program).
type GroupNamer interface {
	NamesGroup(group string) bool
}

// namer is engine.Namer: whether the transport t names method name of group.
type namer interface {
	Names(cfg *config.Config, group, name string) bool
}

// Kept reports whether a call could ever be kept under key (a group, or
// "group/name" with keyBy: method), as the engine's Lookup sends calls with
// cfg through transport t: a method t names, or a group's fallback entry
// (other) when cfg writes the group, or the defaults' ("_OTHER",
// "_OTHER/_OTHER"). A key written by another client of a shared store, or
// by hand, may name neither: Resume opens no queue for it. Whether cfg's
// settings of the key still defer calls is Resume's to check.
func Kept(cfg *config.Config, scope config.Scope, other, key string, t any) bool {
	group, name, byMethod := strings.Cut(key, "/")
	fallback := group == other || cfg.HasGroup(scope, group)
	n, named := t.(namer)
	switch {
	case !byMethod: // keyBy: service: any method of the group, named or not
		if fallback {
			return true
		}
		g, ok := t.(GroupNamer)
		return !named || !ok || g.NamesGroup(group)
	case name == other:
		return fallback
	default:
		return !named || n.Names(cfg, group, name)
	}
}
