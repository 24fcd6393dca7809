// Package ctxtest holds a context for tests whose deadline passes at an
// instant the test chooses, on the goroutine it chooses (for instance
// inside a gate's event, as a waiting call is admitted), which neither a
// real deadline nor testing/synctest can place there.
package ctxtest
