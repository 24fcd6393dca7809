package grpcmw

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// StreamClientInterceptor returns the interceptor for streaming calls.
//
// The breaker and the bulkhead admit a stream when it is created, and the
// stream's outcome is its final status (or its creation error), recorded
// when it ends — with one exception: a stream admitted as a half-open probe
// is judged by its first response message, a success, at once. So a
// long-lived stream (a watch, a subscription) never holds a probe past its
// first response, and a recovered backend closes the breaker while such
// streams stay open. The bulkhead's permit is held for the stream's life and
// given back when it ends in any way: io.EOF, an error, the end of its
// context, or the caller dropping it. Retries cover the creation of the
// stream and, for server-streaming methods (one request, a stream of
// responses), failures before the first response arrives: the request is
// replayed, and no response is ever delivered twice. Timeouts apply to a
// stream only when its method's own configuration sets them (a stream often
// lives far longer than a unary call).
func (c *Chain) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		m := c.lookup(fullMethod)
		if m == nil {
			return streamer(ctx, desc, cc, fullMethod, opts...)
		}
		if m.hedge != nil && desc.ServerStreams && !desc.ClientStreams {
			return m.newHedgedStream(ctx, desc, cc, fullMethod, streamer, opts), nil // hedge_stream.go
		}
		return m.newStream(ctx, desc, cc, fullMethod, streamer, opts)
	}
}

// clientStream is what the caller holds. Its state lives apart, so that a
// stream the caller drops can be collected and its permits given back.
type clientStream struct {
	*streamState
}

type streamState struct {
	m          *method
	ctx        context.Context
	cancel     context.CancelFunc // ends the whole stream (and its overall timeout)
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	fullMethod string
	streamer   grpc.Streamer
	opts       []grpc.CallOption
	attempts   retry.Attempts
	replay     bool // a server-streaming call: replayable until a response arrives
	stopWatch  func() bool

	mu        sync.Mutex
	cur       grpc.ClientStream
	trailer   metadata.MD
	cancelCur context.CancelFunc
	adm       resilience.Admission // the current attempt's permits
	received  bool                 // a response reached the caller: no more retries
	sent      []any                // requests sent so far, to replay
	closeSent bool
	waiting   bool // RecvMsg is in a backoff, without the lock; it ends the retry
	done      bool
}

func (m *method) newStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	s := &streamState{m: m, desc: desc, cc: cc, fullMethod: fullMethod, streamer: streamer, opts: opts,
		replay: m.retry != nil && !desc.ClientStreams && desc.ServerStreams}
	if m.streamOverall > 0 {
		s.ctx, s.cancel = context.WithTimeout(ctx, m.streamOverall)
	} else {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	if m.retry != nil {
		s.attempts = m.retry.Begin(s.ctx)
	}
	// No other goroutine knows s until it is returned: no lock is needed yet.
	err := s.open()
	for err != nil && m.retry != nil {
		wait, again := s.attempts.Next(err)
		if !again || !s.attempts.Wait(wait) {
			break
		}
		err = s.open()
	}
	if err != nil {
		s.cancel()
		return nil, err
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
	if err := s.m.stream.Admit(s.ctx, &s.adm); err != nil {
		return err
	}
	opened := false
	defer func() {
		if !opened {
			s.adm.Abort() // the streamer panicked
		}
	}()
	actx, cancel := context.WithCancel(s.adm.Context())
	opts := s.opts
	if s.replay {
		s.trailer = nil
		opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&s.trailer))
	}
	cs, err := s.streamer(actx, s.desc, s.cc, s.fullMethod, opts...)
	if err == nil && len(s.sent) > 0 {
		err = s.replayLocked(cs)
	}
	opened = true
	if err != nil {
		cancel()
		return s.adm.Done(err)
	}
	s.cur, s.cancelCur = cs, cancel
	return nil
}

// replayLocked sends the buffered requests on a new attempt's stream.
func (s *streamState) replayLocked(cs grpc.ClientStream) error {
	for _, msg := range s.sent {
		if err := cs.SendMsg(msg); err != nil {
			if errors.Is(err, io.EOF) {
				return cs.RecvMsg(new(struct{})) // the status that ended it
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
	s.adm.Done(err)
	if s.cancelCur != nil {
		s.cancelCur()
	}
}

// finish ends the stream once: the attempt's outcome, the retry's, the
// contexts.
func (s *streamState) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(err)
}

func (s *streamState) finishLocked(err error) {
	if s.done {
		return
	}
	s.done = true
	s.settleLocked(err)
	if s.m.retry != nil && !s.waiting { // a waiting RecvMsg ends the retry itself
		if err == io.EOF {
			err = nil
		}
		s.attempts.Done(err)
	}
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.sent = nil
}

func (s *streamState) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// SendMsg sends a request; a replayable call keeps it until a response
// arrives.
func (cs *clientStream) SendMsg(msg any) error {
	s := cs.streamState
	s.mu.Lock()
	if s.replay && !s.received {
		s.sent = append(s.sent, msg)
	}
	cur := s.cur
	s.mu.Unlock()
	return cur.SendMsg(msg)
}

// CloseSend closes the sending side.
func (cs *clientStream) CloseSend() error {
	s := cs.streamState
	s.mu.Lock()
	s.closeSent = true
	cur := s.cur
	s.mu.Unlock()
	return cur.CloseSend()
}

// RecvMsg receives a response. The stream's outcome is recorded before the
// status that ends it is returned; a failure of a replayable call before any
// response is retried here.
func (cs *clientStream) RecvMsg(msg any) error {
	s := cs.streamState
	for {
		err := s.current().RecvMsg(msg)
		s.mu.Lock()
		if err == nil {
			if !s.received {
				s.adm.Commit(nil) // a half-open probe's verdict: see StreamClientInterceptor
			}
			s.received, s.sent = true, nil
			if !s.desc.ServerStreams { // one response: the call is over
				s.finishLocked(nil)
			}
			s.mu.Unlock()
			return nil
		}
		if err == io.EOF || !s.replay || s.received || s.done {
			s.finishLocked(err)
			s.mu.Unlock()
			return err
		}
		// A failure before the first response: settle this attempt and try
		// the call again, replaying its request, while the policy allows.
		s.settleLocked(err)
		aerr := err
		if d, ok := pushback(s.trailer); ok {
			aerr = &pushbackError{error: err, delay: d}
		}
		for {
			wait, again := s.attempts.Next(aerr)
			if !again {
				s.endLocked()
				s.mu.Unlock()
				return err
			}
			// The backoff runs without the lock, so that Context, Header
			// and CloseSend answer meanwhile. Only the context's end can
			// finish the stream now, and it also cuts the wait short.
			s.waiting = true
			s.mu.Unlock()
			ok := s.attempts.Wait(wait)
			s.mu.Lock()
			s.waiting = false
			if !ok || s.done {
				s.endLocked()
				s.mu.Unlock()
				return err
			}
			oerr := s.open()
			if oerr == nil {
				break // receive on the new attempt
			}
			err, aerr = oerr, oerr
		}
		s.mu.Unlock()
	}
}

// endLocked ends a stream whose retry policy has already reported the call
// over.
func (s *streamState) endLocked() {
	s.done = true
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.sent = nil
}

// Header returns the current attempt's header.
func (cs *clientStream) Header() (metadata.MD, error) { return cs.current().Header() }

// Trailer returns the current attempt's trailer.
func (cs *clientStream) Trailer() metadata.MD { return cs.current().Trailer() }

// Context returns the current attempt's context.
func (cs *clientStream) Context() context.Context { return cs.current().Context() }
