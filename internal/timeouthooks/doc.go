// Package timeouthooks gives internal/deadline what package timeout keeps
// unexported: whether a timeout only observes, and its per-call event. It
// imports nothing of meshless, so that package timeout can set the hooks
// (in its init) without importing internal/deadline, which imports it.
package timeouthooks
