package grpcmw

// MethodsInUse returns how many entries c's method table holds.
func MethodsInUse(c *Chain) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Load().methods.n
}

// Chain returns the chain behind s.
func (s *Server) Chain() *Chain { return s.c }

// Pushback reads a trailer's grpc-retry-pushback-ms as the client does.
var Pushback = pushback
