package grpcmw

import (
	"github.com/meshless/meshless/grpcmw/outlier"
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
var Pushback = pushback
