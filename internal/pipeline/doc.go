// Package pipeline runs gates (resilience.Gate) in order around attempts,
// giving every permit back on every path, panics included: the engine's
// innermost part, internal to meshless.
package pipeline
