package main

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
)

// listenPipe is an in-memory listener whose connections are [net.Pipe]s,
// for the backends in a synctest bubble (for gRPC through listenMem). For
// HTTP, bufconn does not serve there: net/http's server interrupts its background read by setting a read
// deadline in the past and then clears it, and bufconn's timer for the
// past deadline can still fire after the clear, so the next request's
// context is canceled as if its client had gone (a hanging backend then
// answers 200 at once). net.Pipe's deadlines have no such race, and a
// goroutine blocked on one is durably blocked.
func listenPipe() (net.Listener, string, []grpc.DialOption, error) {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}, "pipe", nil, nil
}

type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// DialContext connects to the listener (dialerOf finds it by this method).
func (l *pipeListener) DialContext(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
