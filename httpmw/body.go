package httpmw

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"
)

// maxBuffered is how much of a failed attempt's response body an attempt
// reads, so that its connection goes back to the pool at once: 4 KiB, as
// go-retryablehttp drains.
const maxBuffered = 4 << 10

// maxBufferWait bounds how long an attempt waits for the body it buffers:
// a body already on the wire (a proxy's short 503) is read in far less; one
// that trickles, or never ends, does not hold the retry, whose backoff
// begins once the attempt returns.
const maxBufferWait = 100 * time.Millisecond

// buffer reads the body of a response that may be discarded (a status the
// call may retry or hedge on) within the attempt, under its timeout: up to
// maxBuffered bytes, for at most maxBufferWait. A body that ends within
// them is closed, its connection reused, and replaced by the bytes read.
// A longer one keeps the bytes read in front of the rest; one known to be
// longer (its Content-Length) is not read. A body still read when the wait
// is over goes on being read on its own goroutine, up to maxBuffered bytes
// (so that its connection may come back during the backoff): closing it
// ends that read, and reading it takes the bytes read first. It reports
// whether the body was read whole.
//
// The wait is timed by the runtime's timers, not by the chain's clock
// (WithClock): a test that drives that clock by its pending timers would
// count this one too.
func buffer(ctx context.Context, resp *http.Response) bool {
	if resp.ContentLength > maxBuffered {
		return false
	}
	d := &draining{body: resp.Body, done: make(chan struct{})}
	go d.read()
	t := time.NewTimer(maxBufferWait)
	defer t.Stop()
	select {
	case <-d.done:
		if d.err == nil && len(d.b) <= maxBuffered {
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(d.b))
			return true
		}
	case <-t.C:
	case <-ctx.Done():
	}
	resp.Body = d
	return false
}

// draining is a body whose first bytes (up to maxBuffered + 1) are read on
// a goroutine of its own. Read waits for them, then reads the rest; Close
// closes the body, which ends that goroutine's read (net/http's bodies end
// a read when closed).
type draining struct {
	body io.ReadCloser
	done chan struct{} // closed when b and err are set
	b    []byte
	err  error
	off  int
}

func (d *draining) read() {
	defer close(d.done)
	d.b, d.err = io.ReadAll(io.LimitReader(d.body, maxBuffered+1))
}

func (d *draining) Read(p []byte) (int, error) {
	<-d.done
	if d.off < len(d.b) {
		n := copy(p, d.b[d.off:])
		d.off += n
		return n, nil
	}
	if d.err != nil {
		return 0, d.err
	}
	return d.body.Read(p)
}

func (d *draining) Close() error { return d.body.Close() }

// cancelBody is the body of the response a call returns: closing it, or
// reading it to EOF (after which net/http has its connection back), ends
// the context its connection reads under.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// cancelRWBody is a cancelBody whose body is also an io.Writer: the
// connection of a 101 Switching Protocols response, which
// httputil.ReverseProxy and websocket clients write to.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel()
	return err
}

// withCancel returns body so that closing it calls cancel.
func withCancel(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return &cancelRWBody{ReadWriteCloser: rw, cancel: cancel}
	}
	return &cancelBody{ReadCloser: body, cancel: cancel}
}
