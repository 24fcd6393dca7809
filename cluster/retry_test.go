package cluster_test

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dropReplyOnce starts a TCP proxy to the redis-server at target. The first
// request that holds marker reaches the server on a connection of its own
// with a PING after it; once the PING is answered (so the request has run),
// between runs, and the client's connection is dropped with the reply
// unsent: a reply lost after Redis acted, which go-redis retries on a new
// connection (an EOF is retryable). Everything else passes. It returns the
// proxy's address.
func dropReplyOnce(t *testing.T, target string, marker []byte, between func()) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dropped atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			track(cl)
			srv, err := net.Dial("tcp", target)
			if err != nil {
				cl.Close()
				continue
			}
			track(srv)
			wg.Go(func() { _, _ = io.Copy(cl, srv) })
			wg.Go(func() {
				defer cl.Close()
				defer srv.Close()
				var req []byte
				buf := make([]byte, 64<<10)
				for {
					n, err := cl.Read(buf)
					if err != nil {
						return
					}
					req = append(req, buf[:n]...)
					if !completeRESP(req) {
						continue
					}
					if bytes.Contains(req, marker) && dropped.CompareAndSwap(false, true) {
						runAlone(t, target, req)
						between()
						return // the reply is lost
					}
					if _, err := srv.Write(req); err != nil {
						return
					}
					req = req[:0]
				}
			})
		}
	})
	return ln.Addr().String()
}

// runAlone sends req and a PING to the server at target on a connection of
// its own, and returns once the PING is answered: req has run.
func runAlone(t *testing.T, target string, req []byte) {
	c, err := net.Dial("tcp", target)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(append([]byte(nil), req...), "*1\r\n$4\r\nPING\r\n"...)); err != nil {
		t.Error(err)
		return
	}
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.HasSuffix(got, []byte("+PONG\r\n")) {
		n, err := c.Read(buf)
		if err != nil {
			t.Error(err)
			return
		}
		got = append(got, buf[:n]...)
	}
}

// completeRESP reports whether b is whole commands: arrays of bulk strings.
func completeRESP(b []byte) bool {
	line := func() (int, bool) {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 1 {
			return 0, false
		}
		n, err := strconv.Atoi(string(b[1:i]))
		b = b[i+2:]
		return n, err == nil
	}
	for len(b) > 0 {
		if b[0] != '*' {
			return false
		}
		n, ok := line()
		if !ok {
			return false
		}
		for range n {
			if len(b) == 0 || b[0] != '$' {
				return false
			}
			size, ok := line()
			if !ok || len(b) < size+2 {
				return false
			}
			b = b[size+2:]
		}
	}
	return true
}

// An idle holder's give-back (a script that decrements the round's count of
// leased probes) whose reply is lost after Redis ran it: go-redis sends the
// sync's pipeline again, and the probes were given back twice. Between the
// two, another pod had leased them: the second give-back took them off the
// count again, and a third pod leased them too — 4 probes out across the
// cluster for a limit of 2. Now the give-back is never sent again: the sync
// fails (the holder decides alone, as with Redis away) and the limit holds
// for the pods that lease.
func TestAGiveBackIsNeverAppliedTwice(t *testing.T) {
	w := newWorld(t)
	var b, c *pod
	addr := dropReplyOnce(t, w.srv.Addr(), []byte("KEEPTTL"), func() { b.sync() }) // b leases between the two
	// go-redis's default retries (3), with a short backoff.
	rdb := redis.NewClient(&redis.Options{Addr: addr, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: time.Millisecond})
	a := w.podOn("a", rdb)
	b, c = w.pod("b", false), w.pod("c", false)
	openAll(t, w, a, b, c)
	a.sync() // a leases both probes, and gets no call
	b.sync()
	c.sync()
	w.clk.Advance(interval)
	_ = a.c.Sync(t.Context()) // a gives them back; the reply is lost
	c.sync()
	if n := count(probes(5, b, c)); n != 2 {
		t.Fatalf("%d probes leased by b and c, want the limit, 2: the give-back was applied twice", n)
	}
}
