package grpchedge

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// A server-streaming call (one request, a stream of responses) on a method
// that hedges runs its copies when the caller first receives (or asks for
// the header): each copy is one attempt through the stream pipeline of
// internal/engine/order.go; it opens the stream, sends the request and
// waits for the first response message (or the header, when the caller
// asks for it first). The first copy to get one is committed — the caller
// reads that stream to its end — and the others are cancelled, their
// permits given back at once. A copy that ends before any response is an
// answer like a unary one: OK or a fatal code wins, a non-fatal one sends
// the next copy.

// hedgedStream is what the caller holds; its state lives apart, so that a
// stream the caller drops can be collected and its permits given back.
type hedgedStream struct{ *hedgedState }

type hedgedState struct {
	m          *engine.Method
	call       engine.Call // the call plan: overall timeout, hedging
	ctx        context.Context
	cancel     context.CancelFunc
	desc       *grpc.StreamDesc
	cc         *grpc.ClientConn
	fullMethod string
	streamer   grpc.Streamer
	opts       []grpc.CallOption
	stopWatch  func() bool
	timed      bool // the balancer times calls: each copy's context is a note

	mu        sync.Mutex
	req       any
	reqSet    bool
	closeSent bool
	started   bool
	decided   bool      // the hedge that started has returned: win or commitErr is set
	over      sync.Cond // on mu: decided was set
	commitErr error     // the hedge's error when no copy was committed
	copies    [retry.MaxHedgedAttempts]hedgedCopy
	win       *hedgedCopy // the committed copy
	answer    *hedgedCopy // the copy whose end answered the call when none was committed
	given     bool        // answer's results were given to the caller's options
	first     bool        // win.first still has to reach the caller
	done      bool
}

// hedgedCopy is one copy of the stream. live: it holds an open stream and
// its permits after its turn in the hedge returned.
type hedgedCopy struct {
	adm     pipeline.Admission
	dl      deadline.AttemptDeadline
	cs      grpc.ClientStream
	cancel  context.CancelFunc
	header  metadata.MD     // the copy's own: grpc-go writes them when its stream ends,
	trailer metadata.MD     // a cancelled loser's too, so the caller's options are
	peer    peer.Peer       // not given to the copies; finish copies the answer's
	note    *picknote.Note  // when timed, until the copy is finished
	shared  picknote.Shared // note's memory: each copy is made once
	first   proto.Message
	live    bool
	eof     bool // the stream ended OK before any response
	ended   bool // the copy's stream ended in its turn (gRPC wrote its results before copy returned)

	cutMu sync.Mutex
	cutAt time.Time // when the hedge's decision cancelled the copy's context (zero: it did not)
}

// cut records that the hedge's decision cancels the copy's context now.
func (c *hedgedCopy) cut() {
	now := time.Now()
	c.cutMu.Lock()
	defer c.cutMu.Unlock()
	c.cutAt = now
}

// cutTime returns when the hedge's decision cancelled the copy's context,
// zero when it did not.
func (c *hedgedCopy) cutTime() time.Time {
	c.cutMu.Lock()
	defer c.cutMu.Unlock()
	return c.cutAt
}

// NewStream returns the hedged stream of a server-streaming call of m, a
// method that hedges: its copies run when the caller first receives (or
// asks for the header). timed: the balancer times calls, and each copy's
// context is a note of its pick.
func NewStream(ctx context.Context, m *engine.Method, timed bool, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts []grpc.CallOption) grpc.ClientStream {
	s := &hedgedState{m: m, desc: desc, cc: cc, fullMethod: fullMethod, streamer: streamer, opts: opts, timed: timed}
	s.over.L = &s.mu
	s.call = m.Begin(ctx, true)
	s.ctx, s.cancel = context.WithCancel(s.call.Context())
	// On an ended context the watch runs at once, on its own goroutine:
	// finish takes s.mu, so it waits until stopWatch is set.
	s.mu.Lock()
	s.stopWatch = context.AfterFunc(s.ctx, func() { s.finish(s.ctx.Err()) })
	s.mu.Unlock()
	hs := &hedgedStream{s}
	runtime.AddCleanup(hs, func(s *hedgedState) { s.finish(context.Canceled) }, s)
	return hs
}

// start runs the hedge once; mt is the response type, nil to commit at the
// header. A Header and a RecvMsg on two goroutines (gRPC allows it) both
// start it: the second waits for the first's decision.
func (s *hedgedState) start(mt protoreflect.MessageType) error {
	s.mu.Lock()
	if s.started {
		for !s.decided {
			s.over.Wait()
		}
		s.mu.Unlock()
		return s.commitErr
	}
	s.started = true
	if err := s.ctx.Err(); err != nil {
		// The stream's context ended before the first copy (the caller's
		// had, or its overall timeout): none is sent, so nothing counts for
		// or against the backend (engine.Method.Ended).
		s.commitErr = grpcwire.ContextStatus(err)
		s.decide()
		s.mu.Unlock()
		return s.commitErr
	}
	req, reqSet := s.req, s.reqSet
	s.mu.Unlock()

	winner, returned := 0, false
	defer func() {
		if !returned {
			// The hedge panicked (it goes on up): the stream is over, and
			// a RecvMsg after it must not read as a clean end. It ends
			// once every copy is given back, even if that panics.
			s.mu.Lock()
			s.commitErr = status.Error(codes.Internal, "grpcmw: the hedged stream's copies panicked")
			s.decide()
			s.mu.Unlock()
			defer s.endPanicked()
		}
		// Copies that got a response but lost (or every copy, on a panic).
		s.releaseLosers(0, winner)
	}()
	n, err := s.call.Hedge(s.ctx, func(ctx context.Context, n int) error {
		return s.copy(ctx, n, req, reqSet, mt)
	})
	winner, returned = n, true
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.decide()
	if n > 0 && err == nil && s.copies[n-1].live && !s.done {
		s.win, s.first = &s.copies[n-1], mt != nil
		return nil
	}
	if n > 0 && err == nil {
		winner = 0 // the stream ended while it committed: release it above
		err = io.EOF
		if !s.copies[n-1].eof {
			err = s.ctx.Err()
		}
	}
	if n > 0 && s.copies[n-1].ended {
		s.answer = &s.copies[n-1] // ended OK or with a fatal code: its trailer is the call's
	}
	err = pushback.Without(err)
	if te, ok := err.(*timeout.Error); ok {
		err = te.Err // a stream its timeouts cut ends as gRPC ended it (docs/grpc-streams.md)
	}
	s.commitErr = grpcwire.ContextStatus(err)
	return s.commitErr
}

// releaseLosers cancels the streams of the copies from index i on that
// got a response but are not copy winner (every such copy when winner is
// 0), and gives their permits back: each of them, even when giving one
// back panics (a gate's Exit tells observers, which may panic), as the
// panic goes on up. Called once the hedge has returned, by the goroutine
// that ran it.
func (s *hedgedState) releaseLosers(i, winner int) {
	for i < len(s.copies) && (i+1 == winner || !s.copies[i].live) {
		i++
	}
	if i == len(s.copies) {
		return
	}
	c := &s.copies[i]
	c.live = false
	c.cancel()
	defer s.releaseLosers(i+1, winner)
	s.finishCopy(c, status.Error(codes.Canceled, "grpcmw: hedged copy lost"))
}

// decide records that the hedge has returned, its win or commitErr set,
// and wakes a start waiting for it. Called with s.mu held.
func (s *hedgedState) decide() {
	s.decided = true
	s.over.Broadcast()
}

// copy is one copy: admitted through the stream pipeline, it opens the
// stream on a context of its own that outlives the hedge if it is
// committed, and that the hedge's cancellation cuts until then.
func (s *hedgedState) copy(ctx context.Context, n int, req any, reqSet bool, mt protoreflect.MessageType) error {
	c := &s.copies[n-1]
	// The copy's own context derives from the stream's, so that it outlives
	// the hedge when it is committed; until then the hedge's cancellation
	// cuts it: its wait at a gate (a bulkhead's queue, which the committed
	// copy's permit may be holding) as well as its stream.
	cctx, ccancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, func() {
		// When the call's own context has ended (its deadline), so does the
		// copy's, which derives from it, with its error: cancelling it here
		// first would race that, and could turn a DEADLINE_EXCEEDED into a
		// CANCELLED.
		if s.call.Context().Err() == nil {
			c.cut()
			ccancel()
		}
	})
	actx, dl, err := s.call.Admit(cctx, &c.adm, n)
	if err != nil {
		stop()
		ccancel()
		if err == context.Canceled || err == context.DeadlineExceeded {
			// The copy's context ended as the gates admitted it (no copy
			// is sent): the status gRPC gives it, as the streamer would.
			return status.FromContextError(err).Err()
		}
		return err
	}
	c.dl = dl
	defer func() {
		if !c.live {
			s.call.Abort(&c.adm, &c.dl) // a panic; after Finish it releases nothing more
			ccancel()
		}
	}()
	sctx, scancel := actx, ccancel
	if s.timed { // the pick notes its endpoint; finishCopy times it
		c.note = c.shared.Init(sctx).For(s.fullMethod)
		sctx = c.note
	}
	opts := CopyOptions(s.opts, &c.header, &c.trailer, &c.peer)
	cs, err := s.streamer(sctx, s.desc, s.cc, s.fullMethod, opts...)
	if err == nil && reqSet {
		err = cs.SendMsg(req)
	}
	if err == nil || errors.Is(err, io.EOF) {
		if err == nil {
			err = cs.CloseSend()
		}
		if mt != nil {
			c.first = mt.New().Interface()
			err = cs.RecvMsg(c.first)
		} else if md, herr := cs.Header(); herr != nil {
			err = herr
		} else if md == nil {
			// The stream ended without a header (grpc-go: its status is
			// RecvMsg's); no message can come.
			err = cs.RecvMsg(new(emptypb.Empty))
			if err == nil {
				err = status.Error(codes.Internal, "grpcmw: a response after a stream ended without a header")
			}
		} else {
			err = nil
		}
	}
	if err == nil {
		c.adm.Commit(nil) // a half-open probe's verdict, as for other streams
		if !stop() {
			// Lost already: the hedge cancelled this copy.
			scancel()
			return s.finishCopy(c, ctx.Err())
		}
		c.cs, c.cancel, c.live = cs, scancel, true
		return nil
	}
	stop()
	scancel()
	// The stream ended here: a RecvMsg, SendMsg, CloseSend or Header that
	// returned its error, or a streamer that could not open it, has had
	// gRPC write the copy's results (or there was no stream).
	c.ended = true
	// As a unary call's copies: a copy that ran until its deadline is the
	// deadline's, whether its timer or the hedge's cancel reached it first;
	// a loser the hedge cancelled before its deadline is not (CutAt).
	c.dl.Within(s.call.Context())
	c.dl.CutAt(c.cutTime())
	if err == io.EOF {
		c.eof = true
		s.finishCopy(c, nil)
		return nil // ended OK without a response: an answer
	}
	// A copy its perAttempt timeout cut is the hedge's non-fatal timeout,
	// as a unary copy's (start gives the caller gRPC's status).
	return grpcwire.WithPushback(s.finishCopy(c, err), c.trailer)
}

// finishCopy ends copy c, which copy admitted, with err (nil for a stream
// that ended OK): its deadline and gates, and, when the balancer times
// calls, the endpoint its pick noted, told the engine's reading of how long
// the copy took. A copy is finished once, by the goroutine that holds it:
// its own in the hedge, then the one that ends the committed copy.
func (s *hedgedState) finishCopy(c *hedgedCopy, err error) error {
	took, err2 := s.call.FinishCopy(&c.adm, &c.dl, err)
	s.tellTook(c, err, took)
	return err2
}

// finishCommitted is finishCopy for the committed copy, once the hedge is
// over: the call's last end is then its end, which the call's own end
// takes instead of reading the clock again (Call.End).
func (s *hedgedState) finishCommitted(c *hedgedCopy, err error) {
	took, _ := s.call.FinishTimed(&c.adm, &c.dl, err)
	s.tellTook(c, err, took)
}

// tellTook tells the endpoint copy c's pick noted, if it is timed, how the
// copy ended and how long it took.
func (s *hedgedState) tellTook(c *hedgedCopy, err error, took time.Duration) {
	if c.note != nil {
		c.note.Took(err, took)
		c.note = nil
	}
}

// finish ends the stream once, giving the committed copy's permits back.
func (s *hedgedState) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	s.done = true
	if w := s.win; w != nil && w.live {
		w.live = false
		if err == io.EOF {
			err = nil
		}
		returned := false
		defer func() {
			// The copy's context is cancelled once its attempt has ended:
			// an attempt whose context was cancelled first is not its
			// timeout's, and a copy its perAttempt timeout cut would be
			// counted as completed.
			w.cancel()
			if !returned {
				// Giving the copy back panicked (a gate's Exit tells
				// observers): the stream ends at the panic, as a call whose
				// gate's Exit panicked does (engine: runPlain).
				s.endLocked(nil, true)
			}
		}()
		s.finishCommitted(w, err)
		returned = true
	}
	s.endLocked(err, false)
}

// endLocked ends the stream's contexts and records the call: one that
// ended with err, or, when panicked, one that panicked
// (engine.Call.EndPanicked). Called once, with s.mu held and done set.
func (s *hedgedState) endLocked(err error, panicked bool) {
	s.stopWatch()
	s.cancel()
	if panicked {
		s.call.EndPanicked()
	} else {
		s.call.End(err)
	}
	s.req = nil
}

// endPanicked ends the stream whose hedge panicked, once every copy has
// given its permits back, on the panic's way up, which it does not stop:
// as finish ends it, but the call is recorded as one whose attempt
// panicked (engine.Call.EndPanicked: a failure whose error type is
// UNKNOWN), as an unhedged stream's opening that panics is. Without it
// the call was recorded only when the caller, having recovered, received
// again (INTERNAL) or dropped the stream (CANCELLED), and the stream's
// context stayed live.
func (s *hedgedState) endPanicked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done { // the stream's context ended first: finish recorded the call
		return
	}
	s.done = true
	s.endLocked(nil, true)
}

// giveAnswer gives the results of the copy whose end answered the call,
// if one did (its stream ended in the hedge), to the caller's options,
// once: a Header and a RecvMsg on two goroutines both end such a stream.
func (s *hedgedState) giveAnswer() {
	s.mu.Lock()
	a := s.answer
	if s.given {
		a = nil
	}
	s.given = true
	s.mu.Unlock()
	if a != nil {
		s.giveResults(a)
	}
}

// giveResults writes copy c's header, trailer and peer into the caller's
// grpc.Header, grpc.Trailer and grpc.Peer options, as gRPC writes them when
// an unhedged stream ends. Called once c's stream has ended in a RecvMsg
// (gRPC wrote c's own before that RecvMsg returned).
func (s *hedgedState) giveResults(c *hedgedCopy) {
	for _, o := range s.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = c.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = c.trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = c.peer
		}
	}
}

// SendMsg keeps the request for the copies; a server-streaming call sends
// one.
func (hs *hedgedStream) SendMsg(msg any) error {
	defer runtime.KeepAlive(hs) // its cleanup ends the stream: not while a method runs
	s := hs.hedgedState
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.reqSet {
		return status.Error(codes.Internal, "grpcmw: a server-streaming call sends one request, before it receives")
	}
	s.req, s.reqSet = msg, true
	return nil
}

// CloseSend closes the sending side; the copies close theirs when they
// have sent the request.
func (hs *hedgedStream) CloseSend() error {
	defer runtime.KeepAlive(hs) // its cleanup ends the stream: not while a method runs
	s := hs.hedgedState
	s.mu.Lock()
	s.closeSent = true
	s.mu.Unlock()
	return nil
}

// RecvMsg receives a response: the first one runs the hedge.
func (hs *hedgedStream) RecvMsg(msg any) error {
	defer runtime.KeepAlive(hs) // its cleanup ends the stream: not while a method runs
	s := hs.hedgedState
	var mt protoreflect.MessageType
	pm, ok := msg.(proto.Message)
	if ok {
		mt = pm.ProtoReflect().Type()
	}
	if err := s.start(mt); err != nil {
		s.giveAnswer()
		s.finish(err)
		return err
	}
	s.mu.Lock()
	w := s.win
	if s.first {
		s.first = false
		s.mu.Unlock()
		proto.Reset(pm)
		proto.Merge(pm, w.first)
		w.first = nil
		return nil
	}
	s.mu.Unlock()
	if w == nil {
		return io.EOF
	}
	err := w.cs.RecvMsg(msg)
	if err != nil {
		s.giveResults(w)
		s.finish(err)
	}
	return err
}

// Header runs the hedge if it has not run (committing at the first header)
// and returns the committed copy's header. When no copy was committed, the
// stream is over: as gRPC's, Header returns no error and RecvMsg returns
// the call's.
func (hs *hedgedStream) Header() (metadata.MD, error) {
	defer runtime.KeepAlive(hs) // its cleanup ends the stream: not while a method runs
	s := hs.hedgedState
	if err := s.start(nil); err != nil {
		// As gRPC's Header: the stream is over, and its error is Recv's
		// (gRPC returns none here).
		s.giveAnswer()
		s.finish(err)
		return nil, nil
	}
	return s.committed().Header()
}

// Trailer returns the committed copy's trailer, or, when a copy's end
// answered the call before any response, that copy's; before either, none.
// Unlike an unhedged stream's (and grpc-go's), it does not commit the call:
// before a copy has answered there is no trailer of the call to give, and
// committing would mean choosing a copy that has not answered and
// cancelling the others, which may win (gRFC A6 commits a hedged call at
// its first response only).
func (hs *hedgedStream) Trailer() metadata.MD {
	if w := hs.committed(); w != nil {
		return w.Trailer()
	}
	s := hs.hedgedState
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answer != nil {
		return s.answer.trailer
	}
	return nil
}

// Context returns the committed copy's context (its peer, its end), or,
// before the commit, the stream's own: it does not commit the call, for
// the reasons Trailer gives. The stream's context is what an unhedged
// stream's commit protects: it ends with the stream, never with a copy that
// failed or lost, so a caller holding it is not left with a context that
// ended while it receives; it carries no peer (docs/grpc-streams.md).
func (hs *hedgedStream) Context() context.Context {
	if w := hs.committed(); w != nil {
		return w.Context()
	}
	return hs.ctx
}

func (s *hedgedState) committed() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.win == nil {
		return nil
	}
	return s.win.cs
}

// CopyOptions returns a hedged copy's call options: the caller's, but for
// its grpc.Header, grpc.Trailer and grpc.Peer, which gRPC would write when
// each copy ends (a cancelled loser's too, from its own goroutine); the copy
// gets its own places instead, and the caller's get the answer's.
func CopyOptions(opts []grpc.CallOption, header, trailer *metadata.MD, p *peer.Peer) []grpc.CallOption {
	out := make([]grpc.CallOption, 0, len(opts)+3)
	for _, o := range opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
		default:
			out = append(out, o)
		}
	}
	return append(out, grpc.Header(header), grpc.Trailer(trailer), grpc.Peer(p))
}
