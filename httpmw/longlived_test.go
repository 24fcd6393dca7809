package httpmw_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// pipeNet is a real net/http server and a real http.Transport joined by
// net.Pipe connections: in-memory, so that a testing/synctest bubble's
// clock runs while they wait (a loopback socket's wait is not durable).
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	srv   *http.Server
	tr    *http.Transport
}

func newPipeNet(t *testing.T, h http.HandlerFunc) *pipeNet {
	t.Helper()
	p := &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
	p.srv = &http.Server{Handler: h}
	p.tr = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, s := net.Pipe()
		select {
		case p.conns <- s:
			return c, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.done:
			return nil, net.ErrClosed
		}
	}}
	served := make(chan struct{})
	go func() { defer close(served); p.srv.Serve(p) }() //nolint:errcheck // ends with Close
	t.Cleanup(func() {
		p.tr.CloseIdleConnections()
		p.srv.Close()
		<-served
	})
	return p
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error   { p.once.Do(func() { close(p.done) }); return nil }
func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "api.example:80" }

const longYAML = `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { minimumNumberOfCalls: 1, slowCallDurationThreshold: 2s, slowCallRateThreshold: 50 }
  timeout: { perAttempt: 1s, overall: 3s }
hosts:
  api.example:
    bulkhead: { maxConcurrentCalls: 1 }
    retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 10ms }
`

// A Server-Sent Events stream that lasts five minutes, through a route with
// a 1 s per-attempt and 3 s overall timeout and a bulkhead of one: the
// timeouts bound the wait for the header only, the stream is read whole,
// the bulkhead's permit is given back when the header arrived (a second
// call runs while the stream does), and the breaker counts one success per
// call, neither slow nor a timeout.
func TestALongEventStreamIsNotCutNorHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeNet(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/events" {
				io.WriteString(w, "ok") //nolint:errcheck
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := range 10 {
				io.WriteString(w, "data: "+string(rune('0'+i))+"\n\n") //nolint:errcheck
				rc.Flush()                                             //nolint:errcheck
				time.Sleep(30 * time.Second)
			}
		})
		obs := &resiliencetest.Observer{}
		chain := fixChain(t, longYAML, httpmw.WithObserver(obs))
		client := chain.Client(p.tr)
		start := time.Now()
		resp, err := client.Get("http://api.example/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The bulkhead's one permit is free: a second call goes through.
		code, _, err := do(t, client, newRequest(t, http.MethodGet, "http://api.example/other", nil))
		if err != nil || code != 200 {
			t.Fatalf("a call during the stream: %d, %v", code, err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
		if err := sc.Err(); err != nil || n != 10 {
			t.Fatalf("%d events after %v, error %v; want the 10 of the 5 minutes", n, time.Since(start), err)
		}
		if got := outcomes(obs); len(got) != 2 || got[0] != resilience.Success || got[1] != resilience.Success {
			t.Fatalf("breaker outcomes %v, want two successes", got)
		}
		for _, r := range obs.Recorded() {
			if r.Event.Duration > time.Second {
				t.Errorf("%v %v: %v, the stream's time counted", r.Source.Kind, r.Event.Type, r.Event.Duration)
			}
		}
	})
}

// A 101 Switching Protocols answer (a WebSocket-style upgrade): the
// response's body is the connection, writable, and it outlives the
// timeouts; the bulkhead's permit is back once the 101 arrived.
func TestAnUpgradedConnectionOutlivesTheTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeNet(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") != "echo" {
				io.WriteString(w, "ok") //nolint:errcheck
				return
			}
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n") //nolint:errcheck
			brw.Flush()                                                                                         //nolint:errcheck
			io.Copy(conn, brw)                                                                                  //nolint:errcheck // echo until the client closes
		})
		obs := &resiliencetest.Observer{}
		chain := fixChain(t, longYAML, httpmw.WithObserver(obs))
		client := chain.Client(p.tr)
		req := newRequest(t, http.MethodGet, "http://api.example/ws", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d", resp.StatusCode)
		}
		rw, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			t.Fatalf("the body (%T) is not writable", resp.Body)
		}
		code, _, err := do(t, client, newRequest(t, http.MethodGet, "http://api.example/other", nil))
		if err != nil || code != 200 {
			t.Fatalf("a call during the upgrade: %d, %v", code, err)
		}
		buf := make([]byte, 5)
		for range 5 {
			time.Sleep(time.Minute)
			if _, err := rw.Write([]byte("hello")); err != nil {
				t.Fatalf("write: %v", err)
			}
			if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "hello" {
				t.Fatalf("read: %q, %v", buf, err)
			}
		}
		rw.Close()
		if got := outcomes(obs); len(got) != 2 || got[0] != resilience.Success {
			t.Fatalf("breaker outcomes %v, want two successes", got)
		}
	})
}

// afterFuncCtx is a caller's context that counts the contexts derived
// from it that are still registered with it (context.AfterFunc: a child
// registers until it is canceled, or until this one ends).
type afterFuncCtx struct {
	done chan struct{}
	mu   sync.Mutex
	live int
	err  error
}

func newAfterFuncCtx() *afterFuncCtx { return &afterFuncCtx{done: make(chan struct{})} }

func (c *afterFuncCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *afterFuncCtx) Done() <-chan struct{}       { return c.done }
func (c *afterFuncCtx) Value(any) any               { return nil }
func (c *afterFuncCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *afterFuncCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live++
	var once sync.Once
	stop := make(chan struct{})
	go func() {
		select {
		case <-c.done:
			once.Do(func() { c.mu.Lock(); c.live--; c.mu.Unlock(); f() })
		case <-stop:
		}
	}()
	return func() bool {
		stopped := false
		once.Do(func() { c.mu.Lock(); c.live--; c.mu.Unlock(); stopped = true; close(stop) })
		return stopped
	}
}

func (c *afterFuncCtx) cancel() {
	c.mu.Lock()
	c.err = context.Canceled
	c.mu.Unlock()
	close(c.done)
}

func (c *afterFuncCtx) registered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// contextBackend answers /204, /304 and /empty without a body, and
// anything else with 10 KiB.
func contextBackend(t *testing.T) (*backend, *http.Client) {
	t.Helper()
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/empty":
			w.Header().Set("Content-Length", "0")
		default:
			io.WriteString(w, strings.Repeat("x", 10<<10)) //nolint:errcheck
		}
	})
	chain := newChain(t, `
retryThrottling: { enabled: false }
defaults:
  timeout: { perAttempt: 1s, overall: 3s }
  retry: { maxAttempts: 3 }
`, b.host)
	tr, _ := newTransport(t)
	return b, chain.Client(tr)
}

// contextCase is a request and what its caller does with the response's
// body.
type contextCase struct {
	name, method, path string
	use                func(io.ReadCloser)
}

// checkContextsGivenBack sends each case's request under a caller's
// context that counts the contexts derived from it, and fails when one is
// still registered once the caller is done with the response.
func checkContextsGivenBack(t *testing.T, url string, client *http.Client, cases []contextCase) {
	t.Helper()
	for _, c := range cases {
		ctx := newAfterFuncCtx()
		req, err := http.NewRequestWithContext(ctx, c.method, url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.use(resp.Body)
		if n := ctx.registered(); n != 0 {
			t.Errorf("%s: %d contexts still registered with the caller's", c.name, n)
		}
		ctx.cancel()
		resp.Body.Close()
	}
}

// The response a call returns holds a context derived from the caller's
// (its request's, ended when the caller is done with the body), no permit
// and no timer. net/http ends its own such context at once for a response
// without a body (HEAD, 204, 304, Content-Length: 0), which it returns as
// http.NoBody, and which few callers close; so must the chain. Before, the
// context stayed registered with the caller's until the caller's ended:
// one more per request under a long-lived context.
func TestAResponseWithoutABodyHoldsNoContext(t *testing.T) {
	b, client := contextBackend(t)
	var notNoBody []string
	keep := func(name string) func(io.ReadCloser) {
		return func(body io.ReadCloser) {
			if body != http.NoBody {
				notNoBody = append(notNoBody, name)
			}
		}
	}
	checkContextsGivenBack(t, b.URL, client, []contextCase{
		{"HEAD, not closed", http.MethodHead, "/", keep("HEAD")},
		{"204, not closed", http.MethodGet, "/204", keep("204")},
		{"304, not closed", http.MethodGet, "/304", keep("304")},
		{"Content-Length: 0, not closed", http.MethodGet, "/empty", keep("Content-Length: 0")},
	})
	if len(notNoBody) > 0 {
		t.Errorf("the body of %v is not http.NoBody, as net/http returns it", notNoBody)
	}
}

// A body read to EOF is over for net/http, closed or not: its connection
// is back in the pool and its context ended. The chain ends the context it
// derived then too. Before, a caller that read to EOF without Close left
// it registered with its own context until that one ended.
func TestABodyReadToEOFHoldsNoContext(t *testing.T) {
	b, client := contextBackend(t)
	checkContextsGivenBack(t, b.URL, client, []contextCase{
		{"read to EOF, not closed", http.MethodGet, "/", func(b io.ReadCloser) { io.Copy(io.Discard, b) }}, //nolint:errcheck
		{"closed unread", http.MethodGet, "/", func(b io.ReadCloser) { b.Close() }},
		{"read in part, closed", http.MethodGet, "/", func(b io.ReadCloser) { b.Read(make([]byte, 10)); b.Close() }}, //nolint:errcheck
	})
}

// A hedged route sends copies of GET requests, but not of one that asks to
// upgrade its connection (Connection: Upgrade, a WebSocket's handshake):
// each copy would be a session the server opens (and, for the copies that
// lose, tears down at once), as Envoy neither retries nor hedges
// upgrades. Before, a slow handshake was sent three times.
func TestAnUpgradeIsNotHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var upgrades atomic.Int64
		p := newPipeNet(t, func(w http.ResponseWriter, r *http.Request) {
			upgrades.Add(1)
			time.Sleep(200 * time.Millisecond) // past the hedging delay
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n") //nolint:errcheck
			brw.Flush()                                                                                         //nolint:errcheck
			io.Copy(conn, brw)                                                                                  //nolint:errcheck
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
hosts:
  api.example:
    hedging: { maxAttempts: 3, hedgingDelay: 50ms }
`)
		req := newRequest(t, http.MethodGet, "http://api.example/ws", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := chain.Client(p.tr).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(time.Second) // every handler has ended
		synctest.Wait()
		if resp.StatusCode != http.StatusSwitchingProtocols || upgrades.Load() != 1 {
			t.Fatalf("status %d after %d upgrade requests; want 101 after one", resp.StatusCode, upgrades.Load())
		}
	})
}
