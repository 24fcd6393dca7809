package httpmw

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// maxBuffered is how much of a failed attempt's response body an attempt
// reads, so that its connection goes back to the pool at once: 4 KiB, as
// go-retryablehttp drains.
const maxBuffered = 4 << 10

// buffer reads the body of a response that may be discarded (a status the
// call may retry or hedge on) within the attempt, under its timeout: up to
// maxBuffered bytes. A body that ends within them is closed, its
// connection reused, and replaced by the bytes read; a longer one keeps the
// bytes read in front of the rest. It reports whether the body was read
// whole.
func buffer(resp *http.Response) bool {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBuffered+1))
	if err == nil && len(b) <= maxBuffered {
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return true
	}
	resp.Body = &prefixed{Reader: io.MultiReader(bytes.NewReader(b), resp.Body), body: resp.Body}
	return false
}

// prefixed is a body whose first bytes were read already.
type prefixed struct {
	io.Reader
	body io.ReadCloser
}

func (p *prefixed) Close() error { return p.body.Close() }

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
