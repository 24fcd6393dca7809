package clusterkey

import "strings"

// kinds are the words that follow the namespace in the cluster's keys:
// {ns}:w:…, {ns}:open:…, {ns}:probes:…, {ns}:alive:….
var kinds = [...]string{"w", "open", "probes", "alive"}

// Problem returns why ns cannot be a namespace, or "" when it can: a
// namespace that holds ":w:", ":open:", ":probes:" or ":alive:", or ends
// with ":w", ":open", ":probes" or ":alive", could be cut from one of its
// keys another way, as a shorter namespace and a breaker name that begins
// with the rest ("a:w" with breaker "b" and "a" with breaker "w:b" both
// write "a:w:w:b"). Without those, the namespace, the kind and the rest of
// every key are read back from the key alone: no two namespaces share one,
// whatever the breaker names and instance IDs.
func Problem(ns string) string {
	for _, k := range kinds {
		if strings.Contains(ns, ":"+k+":") || strings.HasSuffix(ns, ":"+k) {
			return `must not hold ":w:", ":open:", ":probes:" or ":alive:", nor end with ":w", ":open", ":probes" or ":alive" (the separators of its keys: another namespace could write the same keys)`
		}
	}
	return ""
}
