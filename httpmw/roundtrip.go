package httpmw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/internal/httpcall"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

var errNoURL = errors.New("httpmw: nil Request.URL")

// roundTripper runs each request through its route's policies, in the
// engine's order, each attempt through next.
type roundTripper struct {
	c    *Chain
	next http.RoundTripper
}

// RoundTrip sends req through its route's policies (see
// Chain.RoundTripper).
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		// The caller's mistake, refused before any policy counts it (as
		// http.Transport refuses it), and the body closed as RoundTrip must.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errNoURL
	}
	r := rt.c.router.Load().match(req)
	m := rt.c.e.Lookup(r.key, r.names)
	cl := &call{Context: req.Context(), next: rt.next, clock: rt.c.opts.clock, req: req, m: m, pushback: m.ReadsPushback()}
	body := req.Body != nil && req.Body != http.NoBody
	replayable := !body || req.GetBody != nil
	var n int
	var err error
	switch {
	case (m.Hedges() || m.Retries()) && !replayable:
		cl.once = onceBody
	case m.Hedges() && upgrade(req):
		cl.once = onceUpgrade
	case m.Hedges() && !hedgeable(req, r):
		cl.once = onceNotHedgeable
	case m.Retries() && !idempotent(req):
		cl.once = onceNotIdempotent
	}
	switch {
	case cl.once != 0:
		// A request that may not be sent twice: one attempt.
		err = m.RunOnce(cl, cl)
		n = 1
	default:
		cl.hedged, cl.multi = m.Hedges(), m.Hedges() || m.Retries()
		n, err = cl.run()
	}
	return cl.finish(n, err)
}

// run runs the call's attempts. A panic that goes on up from one (a
// RoundTripper's below the chain) does so once every attempt has returned:
// the answers the others hold are none of the call's, and each holds its
// connection, so they are released first.
func (cl *call) run() (n int, err error) {
	ran := false
	defer func() {
		if !ran {
			cl.release()
		}
	}()
	n, err = cl.m.Run(cl, cl)
	ran = true
	return n, err
}

// idempotent reports whether req may be sent more than once: its method is
// idempotent (RFC 9110: GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or it
// carries an Idempotency-Key (or X-Idempotency-Key) header, as net/http's
// own Transport reads them.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := req.Header["X-Idempotency-Key"]
	return ok
}

// upgrade reports whether req asks to switch its connection to another
// protocol (Connection: Upgrade, a WebSocket's handshake): each copy of it
// would be a session the server opens, so it is not hedged.
func upgrade(req *http.Request) bool {
	if req.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range req.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// hedgeable reports whether req may be sent as concurrent copies: a GET or
// a HEAD, or the method the route that writes hedging names in its pattern.
// An Idempotency-Key does not make a request hedgeable: a server that dedups
// by key answers a copy that arrives while the first is in flight with 409
// Conflict.
func hedgeable(req *http.Request, r *route) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead:
		return true
	}
	return r.hedges != "" && req.Method == r.hedges
}

// call is one request in progress. It is the context the engine runs the
// call with (the caller's, whose values it passes on), so that an observer
// can read the call's HTTP method and status (otelmw records them), and
// the engine.Attempt that makes each attempt.
type call struct {
	context.Context
	next     http.RoundTripper
	clock    resilience.Clock // reads Retry-After's dates
	req      *http.Request
	m        *engine.Method
	pushback bool // the method's attempt policy reads Retry-After
	hedged   bool // copies run concurrently
	multi    bool // the call may make more than one attempt
	once     once // it could have, but the request may not be sent twice: why
	bodySent bool // req.Body went to an attempt (its transport closes it)
	// status is the status of the last response below 400, for observers.
	status atomic.Int32

	mu   sync.Mutex // held, kept: a hedged call's copies store concurrently
	held [retry.MaxHedgedAttempts]answer
	// last is the held answer of a call that retries, one attempt after
	// another: only the last one may be the call's.
	last answer
}

// answer is an attempt's response, kept until the call knows whether it is
// the one it returns, and the cancel of the context it reads under.
type answer struct {
	n        int
	resp     *http.Response
	cancel   context.CancelFunc
	buffered bool // its body was read whole (buffer)
}

func (a *answer) release() {
	if a.resp != nil {
		a.resp.Body.Close()
		if a.cancel != nil {
			a.cancel()
		}
	}
	*a = answer{}
}

// Value answers httpcall.Key with the call itself, so that an observer
// finds it behind a context that wraps it (observe mode's mark, an overall
// deadline); other keys are the caller's context's.
func (cl *call) Value(key any) any {
	if _, ok := key.(httpcall.Key); ok {
		return cl
	}
	return cl.Context.Value(key)
}

// HTTPRequestMethod returns the request's method, for observers.
func (cl *call) HTTPRequestMethod() string {
	if cl.req.Method == "" {
		return http.MethodGet
	}
	return cl.req.Method
}

// HTTPResponseStatusCode returns, for observers, the status of the
// response a call that ended with err returns: err's, or the last one below
// 400 when err is nil; 0 when the call returns no response.
func (cl *call) HTTPResponseStatusCode(err error) int {
	if err == nil {
		return int(cl.status.Load())
	}
	if se := statusOf(err); se != nil {
		return se.status
	}
	return 0
}

// Attempt makes attempt n: a shallow copy of the request with a context of
// its own, derived from the caller's and ended when the attempt's ctx ends
// while the attempt waits for the response's header. The response is kept
// for finish; a non-2xx status is an error for the engine.
func (cl *call) Attempt(ctx context.Context, n int) error {
	if cl.multi && !cl.hedged && n > 1 {
		cl.last.release() // a retry: the attempt before was not the answer
	}
	r, err := cl.request(n)
	if err != nil {
		return err
	}
	resp, cancel, buffered, err := cl.send(ctx, r)
	if err != nil {
		return callerFailed(r, err)
	}
	cl.keep(answer{n: n, resp: resp, cancel: cancel, buffered: buffered})
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		cl.status.Store(int32(resp.StatusCode))
		return nil
	}
	if resp.StatusCode < 400 {
		cl.status.Store(int32(resp.StatusCode))
	}
	se := &statusError{resp: resp, status: resp.StatusCode, n: n, relayed: relayed(resp)}
	if cl.pushback && se.relayed == 0 && (se.status == http.StatusTooManyRequests || se.status == http.StatusServiceUnavailable) {
		if d, ok := retryAfter(resp.Header, cl.clock.Now()); ok {
			return pushback.With(se, d)
		}
	}
	return se
}

// roundTrip sends r through the wrapped RoundTripper and holds it to its
// contract as http.Client does: a response without a body gets
// http.NoBody, and neither a response nor an error is an error.
func (cl *call) roundTrip(r *http.Request) (*http.Response, error) {
	resp, err := cl.next.RoundTrip(r)
	switch {
	case resp == nil && err == nil:
		return nil, fmt.Errorf("httpmw: the RoundTripper (%T) returned neither a response nor an error", cl.next)
	case resp != nil && resp.Body == nil:
		resp.Body = http.NoBody
	}
	return resp, err
}

// send sends r under ctx, the attempt's context. The request's own context
// is derived from the caller's and ends with ctx while the response's header
// is awaited, not after: the engine ends ctx when the attempt returns, and
// the response's body is read after that. cancel ends the request's
// context; it is nil when nothing needs ending (an attempt that runs under
// the caller's own context: no timeout, no hedging).
func (cl *call) send(ctx context.Context, r *http.Request) (resp *http.Response, cancel context.CancelFunc, buffered bool, err error) {
	if c, ok := ctx.(*call); ok && c == cl {
		resp, err = cl.roundTrip(r)
		if err == nil && cl.multi && cl.mayDiscard(resp.StatusCode) {
			buffered = buffer(cl, resp)
		}
		return resp, nil, buffered, err
	}
	rctx, cancel := context.WithCancel(cl.Context)
	stop := context.AfterFunc(ctx, cancel)
	resp, err = cl.roundTrip(r.WithContext(rctx))
	if err == nil && cl.multi && cl.mayDiscard(resp.StatusCode) {
		buffered = buffer(ctx, resp) // within the attempt's time
	}
	if !stop() {
		// The attempt's context ended first (its timeout, the caller, a
		// hedged copy that lost): so did the request's.
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		return nil, nil, false, ctx.Err()
	}
	if err != nil {
		if resp != nil { // a RoundTripper that broke its contract
			resp.Body.Close()
		}
		cancel()
		return nil, nil, false, err
	}
	if cl.Context.Done() == nil {
		// The caller's context never ends: the request's is in no parent's
		// list, and ending it would release nothing.
		cancel = nil
	}
	return resp, cancel, buffered, nil
}

// request returns the request of attempt n: the caller's with the caller's
// body for the first, with a body of its own from GetBody for the others.
func (cl *call) request(n int) (*http.Request, error) {
	req := cl.req
	if n == 1 {
		cl.bodySent = true
	}
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body := req.Body
	if n > 1 {
		var err error
		if body, err = req.GetBody(); err != nil {
			return nil, &requestError{err}
		}
	}
	r := *req // WithContext copies it again; this copy carries the body
	r.Body = &watchedBody{ReadCloser: body}
	return &r, nil
}

// watchedBody is an attempt's request body that keeps its first read
// error: an attempt that fails after it failed on the caller's side (its
// body's source), not the server's. The transport may read it on a
// goroutine of its own after RoundTrip has returned.
type watchedBody struct {
	io.ReadCloser
	failed atomic.Pointer[error]
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed.CompareAndSwap(nil, &err)
	}
	return n, err
}

// requestError is an attempt that failed on the caller's side: its
// request's body could not be read (or made again, GetBody). It counts as
// the caller's (499, as a caller that gave up): not a failure of the
// server, and not retried.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// callerFailed returns err as the caller's when r's body failed to read.
func callerFailed(r *http.Request, err error) error {
	if w, ok := r.Body.(*watchedBody); ok && w.failed.Load() != nil {
		return &requestError{err}
	}
	return err
}

// mayDiscard reports whether a response with status may not be the call's:
// the method retries or hedges on status.
func (cl *call) mayDiscard(status int) bool {
	s := &cl.m.Settings
	codes := s.RetryableCodes
	if cl.hedged {
		codes = s.NonFatalCodes
	}
	for _, c := range codes {
		if int(c) == status {
			return true
		}
	}
	return false
}

// keep holds an attempt's answer until finish.
func (cl *call) keep(a answer) {
	if !cl.hedged {
		cl.last = a
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.held[a.n-1] = a
}

// finish returns what the call returns to the caller: the response of the
// answer that won (n, or the attempt of the status error the call ended
// with), every other response released, and req's body closed if no
// attempt took it.
func (cl *call) finish(n int, err error) (*http.Response, error) {
	if !cl.bodySent && cl.req.Body != nil {
		cl.req.Body.Close()
	}
	if se, ok := err.(*statusError); ok {
		n, err = se.n, nil
	}
	var win answer
	cl.mu.Lock()
	if cl.hedged {
		for i := range cl.held {
			if err == nil && cl.held[i].n == n && n > 0 {
				win, cl.held[i] = cl.held[i], answer{}
			}
			cl.held[i].release()
		}
	} else {
		if err == nil && cl.last.n == n && n > 0 {
			win, cl.last = cl.last, answer{}
		}
		cl.last.release()
	}
	cl.mu.Unlock()
	if err != nil {
		return nil, cl.notRetried(err)
	}
	if win.resp == nil {
		// Cannot happen: a call without error returns an attempt's answer.
		return nil, errors.New("httpmw: the call ended without a response")
	}
	switch {
	case win.cancel == nil:
	case win.buffered, win.resp.Body == http.NoBody:
		// The body is in memory, or there is none (HEAD, 204, 304,
		// Content-Length: 0): the connection is back, as net/http ends its
		// own context at once for a response without a body.
		win.cancel()
	default:
		win.resp.Body = withCancel(win.resp.Body, win.cancel)
	}
	return win.resp, nil
}

// release releases every answer the call holds, when it returns none.
func (cl *call) release() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i := range cl.held {
		cl.held[i].release()
	}
	cl.last.release()
}

// notRetried says, in a call's error, why a call that could have been
// retried was not: its request may not be sent twice.
func (cl *call) notRetried(err error) error {
	var why string
	switch {
	case resilience.IsRejection(err):
		return err
	case cl.once == onceBody:
		why = "not retried: the request's body cannot be replayed (Request.GetBody is nil)"
	case cl.once == onceNotHedgeable:
		why = "not hedged: hedging sends copies of GET and HEAD requests, or of the method its route's pattern names"
	case cl.once == onceUpgrade:
		why = "not hedged: a request that upgrades its connection is sent once"
	case cl.once == onceNotIdempotent:
		why = "not retried: " + cl.req.Method + " is not idempotent (an Idempotency-Key header allows retries)"
	default:
		return err
	}
	return &notReplayableError{why: why, err: err}
}

// once says why a call that could have made several attempts makes one.
type once uint8

const (
	onceBody          once = iota + 1 // its body cannot be replayed
	onceNotHedgeable                  // its method is not one its route hedges
	onceNotIdempotent                 // its method is not idempotent
	onceUpgrade                       // it upgrades its connection, and its route hedges
)
