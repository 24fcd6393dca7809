package grpcmw

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/internal/grpchedge"
	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/internal/pipeline"
)

// StreamClientInterceptor returns the interceptor for streaming calls.
//
// The breaker and the bulkhead admit a stream when it is created, and the
// stream's outcome is its final status (or its creation error), recorded
// when it ends — with one exception: a stream admitted as a half-open probe
// is judged by its first response message, or its header when Header
// returns it first, a success, at once. So a long-lived stream (a watch, a
// subscription) never holds a probe past its first response or the header
// its caller read, and a recovered backend closes the breaker while such
// streams stay open. A stream is slow, for the breaker, when its first
// response (or the header Header returns first) came after the breaker's
// slowCallDurationThreshold, however long it lives afterwards. The
// bulkhead's permit is held for the stream's life and
// given back when it ends in any way: io.EOF, an error, the end of its
// context, or the caller dropping it. Retries cover the creation of the
// stream and, for every kind of stream, failures before the call commits
// (gRFC A6): the messages sent so far are kept, up to a per-call limit
// ([WithRetryBufferLimit], 256 KiB by default), and replayed in order on the
// next attempt, each exactly once per attempt. The call commits, and is
// retried no more, when its first response (or its response headers) reaches
// the caller, when the caller reads its Context or Trailer (as grpc-go's),
// or when a message would outgrow the buffer; no response is ever
// delivered twice. Every attempt after the first carries the
// grpc-previous-rpc-attempts header. Timeouts apply to a stream only when its
// method's own configuration sets them (a stream often lives far longer than
// a unary call).
func (c *Chain) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		m := c.lookup(fullMethod, cc)
		if err := ctx.Err(); err != nil && m.Observes() { // observe mode changes nothing: see engine.Method.Ended
			defer func() { _ = m.Ended(ctx, err) }()
			return streamer(ctx, desc, cc, fullMethod, opts...)
		}
		if m.Hedges() && desc.ServerStreams && !desc.ClientStreams {
			return grpchedge.NewStream(ctx, m, c.timed, desc, cc, fullMethod, streamer, opts), nil
		}
		return newStream(ctx, m, &c.opts, c.timed, desc, cc, fullMethod, streamer, opts)
	}
}

// clientStream is what the caller holds. Its state lives apart, so that a
// stream the caller drops can be collected and its permits given back.
type clientStream struct {
	*streamState
}

type streamState struct {
	m          *engine.Method
	call       engine.Call // the call plan: overall timeout, attempt policy
	ctx        context.Context
	cancel     context.CancelFunc // ends the whole stream
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	fullMethod string
	streamer   grpc.Streamer
	opts       []grpc.CallOption
	replay     bool // the method retries: replayable until the call commits
	observe    bool // mode: observe: the retry decides, never replays, so nothing is kept
	limit      int  // the replay buffer's limit, in bytes
	stopWatch  func() bool
	timed      bool // the balancer times calls: each attempt's context is a note

	mu        sync.Mutex
	cur       grpc.ClientStream
	note      *picknote.Note  // the current attempt's, when timed, until it is finished
	noted     bool            // first has been had: later attempts' notes are their own
	first     picknote.Shared // the first attempt's note, without an allocation of its own
	trailer   metadata.MD
	cancelCur context.CancelFunc
	adm       pipeline.Admission       // the current attempt's permits
	dl        deadline.AttemptDeadline // and its deadline
	answered  bool                     // a response or the header reached the caller
	committed bool                     // no more retries (gRFC A6)
	sent      []any                    // messages sent so far, to replay
	sentBytes int                      // their size on the wire
	closeSent bool
	waiting   bool      // RecvMsg or Header is in a backoff, without the lock; it ends the retry
	reading   bool      // RecvMsg (or Header, for its status) reads the current attempt, without the lock
	attempts  int       // the streams opened: Header knows whether the one it read is still current
	over      sync.Cond // on mu: a read or a retry ended (reading, waiting, cur or done changed)
	done      bool
	ended     bool // endLocked ran: the call's end is recorded once
	panicked  bool // a method of the inner stream panicked: the stream is over (stream_panic.go)
}

func newStream(ctx context.Context, m *engine.Method, o *options, timed bool, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	s := &streamState{m: m, desc: desc, cc: cc, fullMethod: fullMethod, streamer: streamer, opts: opts,
		replay: m.StreamRetries(), observe: m.Observes(), limit: o.retryBufferLimit, timed: timed}
	s.over.L = &s.mu
	if err := ctx.Err(); err != nil {
		return nil, m.Ended(ctx, err) // the backend is never asked: see engine.Method.Ended
	}
	s.call = m.Begin(ctx, true)
	s.ctx, s.cancel = context.WithCancel(s.call.Context())
	opened := false
	defer func() {
		if !opened { // the streamer panicked: open gave the attempt's permits back
			s.cancel()
			s.call.EndPanicked()
		}
	}()
	// No other goroutine knows s until it is returned: no lock is needed yet.
	// Next counts a failure in the retry budget whether or not the method
	// retries; it comes before the cancel: a done context moves nothing.
	err := s.open()
	for err != nil {
		wait, again := s.call.Next(err)
		if !again {
			break
		}
		if !s.call.Wait(wait) {
			// The caller's context ended the backoff: the call's error is
			// the context's (CANCELLED or DEADLINE_EXCEEDED), as gRPC's own
			// retry gives it, not the last attempt's, already counted.
			err = s.call.Context().Err()
			break
		}
		err = s.open()
	}
	opened = true
	if err != nil {
		s.cancel()
		return nil, s.call.End(err)
	}
	// Give the permits back when the context ends, whoever notices first.
	s.mu.Lock()
	s.stopWatch = context.AfterFunc(s.ctx, func() { s.finish(s.ctx.Err()) })
	s.mu.Unlock()
	cs := &clientStream{s}
	runtime.AddCleanup(cs, func(s *streamState) { s.finish(context.Canceled) }, s)
	return cs, nil
}

// open makes one attempt to create the stream, through the attempt
// pipeline (the order of order.go). On failure the attempt is settled and
// its permits are back; so they are if the streamer panics. Called with
// s.mu held, or before s is shared.
func (s *streamState) open() (err error) {
	actx, dl, err := s.call.Admit(s.ctx, &s.adm, s.call.Attempts()+1)
	if err != nil {
		// A refusal, or the context's own error when it ended as the
		// gates admitted the attempt (no attempt is made): the status
		// gRPC gives it, as the streamer would have.
		return wireError(err)
	}
	s.dl = dl
	opened := false
	defer func() {
		if !opened {
			s.call.Abort(&s.adm, &s.dl) // the streamer panicked
		}
	}()
	actx, cancel := context.WithCancel(actx)
	if s.timed { // the pick notes its endpoint; finishAttempt times it
		if !s.noted {
			s.note, s.noted = s.first.Init(actx).For(s.fullMethod), true
		} else {
			s.note = picknote.NewShared(actx).For(s.fullMethod) // a note is never had twice
		}
		actx = s.note
	}
	opts := s.opts
	if s.m.ReadsPushback() {
		s.trailer = nil
		opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&s.trailer))
	}
	cs, err := s.streamer(actx, s.desc, s.cc, s.fullMethod, opts...)
	if err == nil && (len(s.sent) > 0 || s.closeSent) { // a CloseSend alone is replayed too
		err = s.replayLocked(cs)
	}
	opened = true
	if err != nil {
		cancel()
		return s.finishAttempt(err)
	}
	s.cur, s.cancelCur = cs, cancel
	s.attempts++
	return nil
}

// finishAttempt ends the current attempt, which open admitted, with err
// (nil for a stream that ended OK): its deadline and gates, and, when the
// balancer times calls, the endpoint its pick noted, told the engine's
// reading of how long the attempt took (the outlier balancer's slow-call
// detector). Called with s.mu held, or before s is shared.
func (s *streamState) finishAttempt(err error) error {
	took, ferr := s.call.FinishTimed(&s.adm, &s.dl, err)
	if s.note != nil {
		s.note.Took(err, took)
		s.note = nil
	}
	return ferr
}

// replayLocked sends the buffered requests on a new attempt's stream. An
// attempt that ends before it has them all (io.EOF: the server answered
// and closed, or failed) becomes the current one all the same: the
// caller's RecvMsg reads what the server sent and how it ended — a response
// and OK is the call's answer, a failure is retried as any other.
func (s *streamState) replayLocked(cs grpc.ClientStream) error {
	for _, msg := range s.sent {
		if err := cs.SendMsg(msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	if s.closeSent {
		return cs.CloseSend()
	}
	return nil
}

// settleLocked records the current attempt's outcome and gives its permits
// back.
func (s *streamState) settleLocked(err error) {
	if err == io.EOF {
		err = nil
	}
	s.finishAttempt(err)
	if s.cancelCur != nil {
		s.cancelCur()
	}
}

// finish ends the stream once: the attempt's outcome, the retry's, the
// contexts.
func (s *streamState) finish(err error) {
	s.mu.Lock()
	s.finishLocked(err, err)
	s.mu.Unlock() // finishLocked released it if it panicked
}

// finishLocked ends the stream with err, the status its caller sees; aerr
// is the same error with the server's pushback, for the retry throttle,
// when the status came from the server (its trailer is then complete).
// When an observer it tells panics, the stream ends as a call that panics
// and s.mu is released on the panic's way up (heldLocked).
func (s *streamState) finishLocked(err, aerr error) {
	if s.done {
		return
	}
	returned := false
	defer s.unlessReturned(&returned)
	s.done = true
	s.over.Broadcast()
	if aerr == io.EOF {
		aerr = nil
	}
	if !s.waiting { // a waiting RecvMsg settled its attempt, and ends the retry itself
		s.settleLocked(err)
		s.call.Done(aerr)
	}
	s.endLocked(aerr)
	returned = true
}

// SendMsg sends a message. Until the call commits, a retrying method keeps
// it to replay; the message that would outgrow the buffer commits the call.
// When the current attempt has already ended, a message that is kept
// reports success: RecvMsg learns how the attempt ended and, if the policy
// retries, replays every kept message on the next attempt. During a
// retry's backoff SendMsg waits for the next attempt.
func (cs *clientStream) SendMsg(msg any) error {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	s := cs.streamState
	s.mu.Lock()
	for s.waiting { // as grpc-go's: the message goes to the next attempt, after the replay
		s.over.Wait()
	}
	if s.replay && !s.committed {
		if n, ok := wireSize(msg); ok && s.sentBytes+n <= s.limit {
			if !s.observe { // counted all the same: the call commits as under enforce
				s.sent = append(s.sent, msg)
			}
			s.sentBytes += n
		} else {
			s.commitLocked() // A6: the outgoing message outgrew the buffer
		}
	}
	cur := s.cur
	s.mu.Unlock()
	returned := false
	defer s.guard(&returned)
	err := cur.SendMsg(msg)
	returned = true
	if err == io.EOF {
		s.mu.Lock()
		kept := s.replay && !s.observe && !s.committed && !s.done
		s.mu.Unlock()
		if kept {
			return nil
		}
	}
	return err
}

// answeredLocked commits the call whose current attempt's first response
// or header reached the caller; the first time, that is a half-open probe's
// verdict, a success, at once (see StreamClientInterceptor): a long-lived
// stream that sent its header and then nothing for minutes does not hold
// the probe's place meanwhile. Any other attempt's outcome is still its
// final status.
func (s *streamState) answeredLocked() {
	if !s.answered {
		s.answered = true
		s.heldLocked(func() { s.adm.Commit(nil) }) // a half-open breaker's verdict, told
	}
	s.commitLocked()
}

// commitLocked commits the call: no more retries, and the kept messages go.
func (s *streamState) commitLocked() {
	s.committed = true
	s.sent, s.sentBytes = nil, 0
}

// wireSize returns the size a message takes on the wire, the 5-byte gRPC
// frame header included, as grpc-go counts its own retry buffer; false for
// a message that is not a protocol buffer (its size is not known).
func wireSize(msg any) (int, bool) {
	switch m := msg.(type) {
	case proto.Message:
		return proto.Size(m) + 5, true
	case protoadapt.MessageV1:
		return proto.Size(protoadapt.MessageV2Of(m)) + 5, true
	}
	return 0, false
}

// CloseSend closes the sending side; a replayable call replays it too.
func (cs *clientStream) CloseSend() error {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	s := cs.streamState
	s.mu.Lock()
	s.closeSent = true
	cur := s.cur
	s.mu.Unlock()
	returned := false
	defer s.guard(&returned)
	err := cur.CloseSend()
	returned = true
	return err
}

// RecvMsg receives a response. The stream's outcome is recorded before the
// status that ends it is returned; a failure of a retrying method's call
// before it commits is retried here, replaying what was sent.
func (cs *clientStream) RecvMsg(msg any) error {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	s := cs.streamState
	for {
		s.mu.Lock()
		for s.reading || s.waiting { // Header reads the attempt's status, or retries
			s.over.Wait()
		}
		if s.panicked {
			s.mu.Unlock()
			return errStreamPanicked
		}
		err := s.readLocked(s.cur, msg)
		if err == nil {
			s.answeredLocked()
			if !s.desc.ServerStreams { // one response: the call is over
				s.finishLocked(nil, nil)
			}
			s.mu.Unlock()
			return nil
		}
		err, again := s.failedLocked(err)
		s.mu.Unlock()
		if !again {
			return err
		}
	}
}

// failedLocked handles the current attempt's failure err, which RecvMsg
// (or Header) read: it ends the stream, or, for a failure before the call
// committed that the policy retries, settles the attempt and opens the
// next one, replaying what was sent. again reports a new attempt; else err
// is the status that ended the stream. Called with s.mu held, which it
// releases during a backoff.
func (s *streamState) failedLocked(err error) (_ error, again bool) {
	aerr := err
	if err != io.EOF && !s.done {
		aerr = grpcwire.WithPushback(err, s.trailer)
	}
	if err == io.EOF || !s.replay || s.committed || s.done {
		s.finishLocked(err, aerr)
		return err, false
	}
	s.heldLocked(func() { s.settleLocked(err) })
	for {
		wait, again := s.nextLocked(aerr)
		if !again {
			s.heldLocked(func() { s.endLocked(err) })
			return err, false
		}
		// The backoff runs without the lock, so that CloseSend answers
		// meanwhile and the context's watcher can end the stream (Header,
		// RecvMsg, SendMsg, Context and Trailer wait for the next attempt). Only the context's end can finish the stream now, and
		// it also cuts the wait short.
		s.waiting = true
		s.mu.Unlock()
		ok := s.waitUnlocked(wait)
		s.mu.Lock()
		s.waiting = false
		s.over.Broadcast()
		if s.panicked { // a method of the inner stream panicked meanwhile
			s.ended = true
			s.heldLocked(s.call.EndPanicked)
			return errStreamPanicked, false
		}
		if !ok || s.done {
			// Only the context's end cuts the wait or ends the stream
			// meanwhile: the caller gets its status, as from newStream.
			if cerr := s.call.Context().Err(); cerr != nil {
				err = cerr
			}
			s.heldLocked(func() { s.endLocked(err) })
			return grpcwire.ContextStatus(err), false
		}
		oerr := s.openHeld()
		if oerr == nil {
			return nil, true // receive on the new attempt
		}
		err, aerr = oerr, oerr
	}
}

// readLocked receives msg from cur, the current attempt, without the lock:
// it is taken again when RecvMsg returns, on every path (reading stays true
// meanwhile, so that no other goroutine reads cur at once). Called with
// s.mu held and no read under way; it returns with s.mu held, but not if
// cur.RecvMsg panics: the stream then ends as a call that panics
// (panickedLocked) on the panic's way up.
func (s *streamState) readLocked(cur grpc.ClientStream, msg any) (err error) {
	s.reading = true
	s.mu.Unlock()
	returned := false
	defer func() {
		if !returned {
			s.mu.Lock()
		}
		s.reading = false
		s.over.Broadcast()
		s.unlessReturned(&returned)
	}()
	err = cur.RecvMsg(msg)
	s.mu.Lock()
	returned = true
	return err
}

// openHeld is open for RecvMsg, which holds s.mu: when the streamer (an
// interceptor inside) panics, open gives the attempt's permits back, and
// openHeld ends the stream (its contexts, its watcher; the caller gets the
// panic, not a status) and releases the lock on the panic's way up, so that
// the stream's other methods and its context's watcher do not block.
func (s *streamState) openHeld() error {
	returned := false
	defer func() {
		if !returned {
			s.done, s.ended = true, true
			if s.stopWatch != nil {
				s.stopWatch()
			}
			s.cancel()
			s.sent, s.sentBytes = nil, 0
			s.mu.Unlock()
			s.call.EndPanicked() // as endLocked ends it: once, ended is set
		}
	}()
	err := s.open()
	returned = true
	return err
}

// endLocked ends a stream whose attempt policy has reported the call over:
// the overall timeout's and the call's events, the contexts.
func (s *streamState) endLocked(err error) {
	s.done = true
	if s.ended { // the context's end and a RecvMsg waking from its backoff both end it
		return
	}
	s.ended = true
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.call.End(err)
	s.sent, s.sentBytes = nil, 0
}

// Trailer returns the trailer of the attempt that answers the call, and
// commits the call, as grpc-go's own retry does: a caller that reads it
// before the stream ends (gRPC says not to) gets no retry afterwards.
func (cs *clientStream) Trailer() metadata.MD {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	cur := cs.committedAttempt()
	returned := false
	defer cs.guard(&returned)
	md := cur.Trailer()
	returned = true
	return md
}

// Context returns the context of the attempt that answers the call (its
// peer, its end), and commits the call, as grpc-go's own retry does: were
// the call retried afterwards, the caller would hold a context that ended
// with the failed attempt while the stream went on, and its peer.
func (cs *clientStream) Context() context.Context {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	cur := cs.committedAttempt()
	returned := false
	defer cs.guard(&returned)
	ctx := cur.Context()
	returned = true
	return ctx
}

// committedAttempt commits the call and returns its attempt. During a
// retry's backoff it waits for the next attempt, as SendMsg does (grpc-go's
// stream holds its lock through the backoff): the attempt that failed is
// not the call's.
func (s *streamState) committedAttempt() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.waiting {
		s.over.Wait()
	}
	if !s.committed {
		s.commitLocked()
	}
	return s.cur
}
