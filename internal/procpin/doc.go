// Package procpin tells a goroutine which processor (P) it runs on, so
// that a policy can keep a shard of its state per processor and two cores
// calling at once write different cache lines.
package procpin
