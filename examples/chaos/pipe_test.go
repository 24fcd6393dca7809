package main

import (
	"net"

	"google.golang.org/grpc"

	"github.com/meshless/meshless/internal/memnet"
)

// listenPipe is an in-memory listener whose connections are [net.Pipe]s
// (package memnet), for the backends in a synctest bubble: over HTTP here,
// over gRPC through listenMem. For HTTP, bufconn does not serve there:
// net/http's server interrupts its background read by setting a read
// deadline in the past and then clears it, and bufconn's timer for the past
// deadline can still fire after the clear, so the next request's context is
// canceled as if its client had gone (a hanging backend then answers 200 at
// once). net.Pipe's deadlines have no such race, and a goroutine blocked on
// one is durably blocked.
func listenPipe() (net.Listener, string, []grpc.DialOption, error) {
	return memnet.Listen(), "pipe", nil, nil
}
