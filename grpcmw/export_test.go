package grpcmw

import (
	"google.golang.org/grpc"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/resilience"
)

// MethodsInUse returns how many entries c's method table holds.
func MethodsInUse(c *Chain) int { return c.e.Keys() }

// Chain returns the chain behind s.
func (s *Server) Chain() *Chain { return s.c }

// EjectionListener is the listener a chain gives its outlier monitor.
func EjectionListener(user outlier.Listener, rec resilience.Recorder) outlier.Listener {
	return ejectionListener{user: user, rec: rec}
}

// Pushback reads a trailer's grpc-retry-pushback-ms as the client does.
var Pushback = grpcwire.Pushback

// StreamLockHeld reports whether the lock of the stream the interceptor
// returned is held .
func StreamLockHeld(cs grpc.ClientStream) bool {
	s := cs.(*clientStream)
	if s.mu.TryLock() {
		s.mu.Unlock()
		return false
	}
	return true
}

// UnlockStream releases a lock left held, so that a failing test does not
// leak the goroutines waiting for it.
func UnlockStream(cs grpc.ClientStream) { cs.(*clientStream).mu.Unlock() }

// FinishStream ends a stream as its context's watcher does when the
// context ends.
func FinishStream(cs grpc.ClientStream, err error) { cs.(*clientStream).finish(err) }

// ServiceConfigOf returns the service config c's DialOptions install.
func ServiceConfigOf(c *Chain) (string, error) { return c.serviceConfig() }
