// Package breakerhooks gives the engine what package circuitbreaker keeps
// unexported: a breaker's slow-call threshold, read without copying its
// configuration, and a word when it closes. It imports nothing of meshless, so that package
// circuitbreaker can set the hook (in its init) without an import cycle.
package breakerhooks
