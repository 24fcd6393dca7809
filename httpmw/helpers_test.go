package httpmw_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// backend is a real net/http server on loopback TCP whose handler a test
// sets. It counts the requests that reached it and the connections it
// accepted (ConnState's StateNew comes before a connection's first request
// is served).
type backend struct {
	*httptest.Server
	host     string // host:port, as the server's URL writes it
	requests atomic.Int64
	conns    atomic.Int64
	h        atomic.Pointer[http.HandlerFunc]
}

func newBackend(t *testing.T, h http.HandlerFunc) *backend {
	t.Helper()
	b := &backend{}
	b.set(h)
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.requests.Add(1)
		(*b.h.Load())(w, r)
	}))
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	b.host = strings.TrimPrefix(b.URL, "http://")
	return b
}

func (b *backend) set(h http.HandlerFunc) { b.h.Store(&h) }

// script answers the requests in turn with statuses[i] (the last one
// again once they are spent) and a small body naming the request's number.
func script(statuses ...int) (http.HandlerFunc, *atomic.Int64) {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1) - 1
		s := statuses[min(int(i), len(statuses)-1)]
		io.Copy(io.Discard, r.Body) //nolint:errcheck // the test reads what it needs elsewhere
		w.WriteHeader(s)
		io.WriteString(w, "answer "+strconv.Itoa(int(i)+1)) //nolint:errcheck
	}, &n
}

// conns counts a client transport's open connections: each dialled
// connection until it is closed.
type conns struct {
	open, dialled atomic.Int64
}

type countedConn struct {
	net.Conn
	c    *conns
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.c.open.Add(-1) })
	return c.Conn.Close()
}

// newTransport returns a transport of the test's own, that counts its
// connections; its idle connections are closed when the test ends.
func newTransport(t *testing.T) (*http.Transport, *conns) {
	t.Helper()
	cs := &conns{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cs.open.Add(1)
		cs.dialled.Add(1)
		return &countedConn{Conn: c, c: cs}, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, cs
}

// newChain builds a chain from yaml, in which {{host}} stands for host.
func newChain(t *testing.T, yaml, host string, opts ...httpmw.Option) *httpmw.Chain {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(yaml, "{{host}}", host)))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := httpmw.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	return chain
}

// get sends a request and returns its status and body, or its error.
func do(t *testing.T, client *http.Client, req *http.Request) (int, string, error) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp.StatusCode, string(b), nil
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// outcomes returns the outcomes the breaker recorded, in order.
func outcomes(obs *resiliencetest.Observer) []resilience.Outcome {
	var out []resilience.Outcome
	for _, r := range obs.Recorded() {
		if r.Source.Kind == resilience.KindCircuitBreaker && r.Event.Type == resilience.EventCall {
			out = append(out, r.Event.Outcome)
		}
	}
	return out
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int64
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// newServer is a Server of the configuration yaml, closed when the test
// ends.
func newServer(t *testing.T, yaml string, opts ...httpmw.ServerOption) *httpmw.Server {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpmw.NewServer(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
