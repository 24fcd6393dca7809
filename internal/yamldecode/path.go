package yamldecode

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Join appends key to a path, as problems' paths are written: keys that
// are not plain words (service names have dots) are quoted, and long keys
// clipped.
func Join(path, key string) string {
	key = Clip(key)
	if !plain(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Show describes a node for a problem's message: a mapping, a list, or the
// scalar's value (a string quoted), clipped.
func Show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			return strconv.Quote(Clip(n.Value))
		}
		return Clip(n.Value)
	}
	return "nothing"
}

// maxShown is how many runes of a key or value a message shows.
const maxShown = 64

// Clip shortens s, a key or value for a message, to 64 runes, marking the
// cut with "…".
func Clip(s string) string {
	r := 0
	for i := range s {
		if r == maxShown {
			return s[:i] + "…"
		}
		r++
	}
	return s
}
