package memnet

import (
	"context"
	"net"
	"sync"
)

// Listener is an in-memory listener: each DialContext makes a [net.Pipe]
// and hands its server end to Accept. It is safe for concurrent use.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

var _ net.Listener = (*Listener)(nil)

// Listen returns a new listener.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// DialContext connects to the listener once Accept takes the connection. It
// returns [net.ErrClosed] once the listener is closed, and ctx's error if
// ctx ends first.
func (l *Listener) DialContext(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
	_ = client.Close()
	_ = server.Close()
	return nil, net.ErrClosed
}

// Dialer returns DialContext as grpc.WithContextDialer takes it: any
// address reaches the listener.
func (l *Listener) Dialer() func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }
}

// Accept waits for the next connection; [net.ErrClosed] once the listener is
// closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener; connections already made stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the listener's address, "mem".
func (l *Listener) Addr() net.Addr { return addr{} }

type addr struct{}

func (addr) Network() string { return "mem" }
func (addr) String() string  { return "mem" }
