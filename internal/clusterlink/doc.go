// Package clusterlink is an engine's link to its cluster (package cluster):
// the cluster built from the configuration's cluster section, on the Redis
// client given in Go or on one dialled with the cluster's timeouts; started
// at once when the section writes a namespace, else started on the
// transport's first call in a namespace derived from that call's target
// (Link.Bind); the breakers that join and leave it; and its close. Which
// breakers exist is the engine's (internal/engine): it serialises every
// method of a Link but WantsTarget and Bound with its own lock.
package clusterlink
