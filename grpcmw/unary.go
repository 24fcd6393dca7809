package grpcmw

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/meshless/meshless/internal/engine"
	"github.com/meshless/meshless/internal/grpchedge"
	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/retry"
)

// UnaryClientInterceptor returns the interceptor for unary calls.
func (c *Chain) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, fullMethod string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		m := c.lookup(fullMethod, cc)
		if !m.Hedges() {
			// The engine takes the call as an interface, so it lives on the
			// heap: a pooled one saves allocating it on every call. Nothing
			// keeps it once Run has returned (a dead-letter entry copies what
			// it needs); a call that panics leaves it to the collector.
			u := unaryCalls.Get().(*unaryCall)
			u.fullMethod, u.req, u.reply, u.cc, u.invoker, u.opts = fullMethod, req, reply, cc, invoker, opts
			u.pushback, u.timed = m.ReadsPushback(), c.timed
			_, err := m.Run(ctx, u)
			u.reset()
			unaryCalls.Put(u)
			return err
		}
		u := hedgedUnaries.Get().(*hedgedUnary) // as unaryCalls, above
		u.fullMethod, u.req, u.reply, u.cc, u.invoker, u.opts = fullMethod, req, reply, cc, invoker, opts
		u.pushback, u.timed = m.ReadsPushback(), c.timed
		err := u.runHedged(ctx, m)
		u.reset()
		u.hedge = hedgeState{}
		hedgedUnaries.Put(u)
		return err
	}
}

// The functions of an unhedged unary call follow, in the order it runs
// them, for the layout of the code (see internal/engine/callpath.go).

// unaryCalls are the unhedged unary calls' unaryCall values, reused.
var unaryCalls = sync.Pool{New: func() any { return new(unaryCall) }}

// hedgedUnaries are the hedged unary calls' hedgedUnary values, reused:
// runHedged returns once every copy has returned.
var hedgedUnaries = sync.Pool{New: func() any { return new(hedgedUnary) }}

// lookup returns the policy set of fullMethod ("/pkg.Svc/Method"). After a
// method's first call it takes no lock and allocates nothing. A method the
// chain does not know, or past its bound, gets its service's or the
// defaults' OtherMethod entry (see [OtherMethod]).
//
// A method's first call on a chain whose cluster namespace comes from its
// target binds the cluster to cc's target first (docs/cluster.md).
func (c *Chain) lookup(fullMethod string, cc *grpc.ClientConn) *engine.Method {
	if m, ok := c.e.Cached(fullMethod); ok {
		return m
	}
	if cc != nil && c.e.WantsTarget() {
		c.e.BindTarget(cc.CanonicalTarget())
	}
	if c.t.conn.learn(cc) {
		c.e.Kick("") // deferred calls of a previous run can be replayed now
	}
	return c.e.Lookup(fullMethod, func(cfg *Config) (string, string, bool) {
		svc, name, ok := splitMethod(fullMethod)
		return svc, name, ok && known(cfg, svc, name)
	})
}

// Attempt makes attempt n of the call. It reads the server's pushback from
// the trailer for the retry policy (gRFC A6).
func (u *unaryCall) Attempt(ctx context.Context, n int) error {
	if u.timed { // the pick notes its endpoint; Took times it
		u.note = picknote.New(ctx).For(u.fullMethod)
		ctx = u.note
	}
	if !u.pushback {
		return u.invoker(ctx, u.fullMethod, u.req, u.reply, u.cc, u.opts...)
	}
	u.trailer = nil
	var err error
	if len(u.opts) == 0 { // the common case: gRPC gets u's own option, as it is
		if u.onlyTrailer[0] == nil {
			u.onlyTrailer[0] = grpc.Trailer(&u.trailer)
		}
		err = u.invoker(ctx, u.fullMethod, u.req, u.reply, u.cc, u.onlyTrailer[:]...)
	} else {
		opts := append(append(u.optsBuf[:0], u.opts...), grpc.Trailer(&u.trailer))
		err = u.invoker(ctx, u.fullMethod, u.req, u.reply, u.cc, opts...)
		clear(u.optsBuf[:min(len(opts), len(u.optsBuf))]) // keeps none of the caller's options
	}
	if err == nil {
		return nil
	}
	return grpcwire.WithPushback(err, u.trailer)
}

// Took passes the time the engine read for attempt n, which ended with err,
// to the endpoint its pick noted (the outlier balancer's slow-call
// detector).
func (u *unaryCall) Took(_ int, err error, took time.Duration) {
	if u.note != nil {
		u.note.Took(pushback.Without(err), took)
		u.note = nil
	}
}

// reset clears what u keeps of the caller's call, field by field (a
// pooled value: only what a call set, not the whole value).
func (u *unaryCall) reset() {
	u.fullMethod, u.req, u.reply, u.cc, u.invoker, u.opts, u.trailer = "", nil, nil, nil, nil, nil, nil
	u.note = nil
}

type unaryCall struct {
	fullMethod string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption
	pushback   bool // the method's attempt policy reads the server's pushback
	// timed: each attempt's context is a note (package picknote) for the
	// outlier balancer, which is told the attempt's time (Took). A hedged
	// call's first copy uses note; each later copy has its own (hedgeCopy).
	timed bool
	note  *picknote.Note // the current attempt's, until Took
	// trailer and optsBuf serve the attempts that read the trailer: the
	// caller's options and grpc.Trailer(&trailer), without allocating for
	// a caller that passes few options; optsBuf is cleared after each.
	trailer metadata.MD
	optsBuf [4]grpc.CallOption
	// onlyTrailer is grpc.Trailer(&trailer) alone, made once, for the
	// attempts of a caller that passes no option.
	onlyTrailer [1]grpc.CallOption
}

// hedgedUnary is a unary call that hedges: its copies after the first,
// each made when it is sent.
type hedgedUnary struct {
	unaryCall
	hedge hedgeState
}

// hedgeCopy is one hedged copy's own results: gRPC writes each into it, and
// the winner's are copied to the caller's after every copy has returned.
// note is the copy's context when the call is timed: made with the copy,
// never reused.
type hedgeCopy struct {
	reply           proto.Message
	header, trailer metadata.MD
	peer            peer.Peer
	note            picknote.Note
}

// Attempt makes attempt n of a hedged call: copy n, from 2, with its own
// results.
func (u *hedgedUnary) Attempt(ctx context.Context, n int) error {
	if n > 1 {
		return u.copy(ctx, n)
	}
	return u.unaryCall.Attempt(ctx, n)
}

// hedged runs a unary call under the method's hedging policy: each copy is
// one attempt through the gates (breaker, rate limiter, bulkhead, attempt
// timeout). The first copy writes into the caller's reply, header, trailer
// and peer, as an unhedged call does; a copy sent after it gets its own,
// made when it is sent, so that copies never write to the same place. When
// a later copy wins, its results replace the first's once every copy has
// returned.
func (u *hedgedUnary) runHedged(ctx context.Context, m *engine.Method) error {
	msg, ok := u.reply.(proto.Message)
	if !ok {
		// A reply this package cannot copy (another codec): one attempt.
		return m.RunOnce(ctx, u)
	}
	u.hedge.mt = msg.ProtoReflect().Type() // the type, read before copy 1 writes into msg
	n, err := m.Run(ctx, u)
	if n > 1 {
		w := u.hedge.copies[n-2]
		if err == nil {
			proto.Reset(msg)
			proto.Merge(msg, w.reply)
		}
		for _, o := range u.opts {
			switch o := o.(type) {
			case grpc.HeaderCallOption:
				*o.HeaderAddr = w.header
			case grpc.TrailerCallOption:
				*o.TrailerAddr = w.trailer
			case grpc.PeerCallOption:
				*o.PeerAddr = w.peer
			}
		}
	}
	return err
}

// hedgeState is a hedged call's copies after the first, each with its own
// results, made as it is sent.
type hedgeState struct {
	mt     protoreflect.MessageType
	copies [retry.MaxHedgedAttempts - 1]*hedgeCopy
}

// copy is hedged copy n (from 2), with its own results.
func (u *hedgedUnary) copy(ctx context.Context, n int) error {
	c := &hedgeCopy{reply: u.hedge.mt.New().Interface()}
	u.hedge.copies[n-2] = c // each copy writes its own slot; read once every copy has returned
	opts := grpchedge.CopyOptions(u.opts, &c.header, &c.trailer, &c.peer)
	if u.timed { // the pick notes its endpoint; Took times it
		c.note.Context = ctx
		ctx = c.note.For(u.fullMethod)
	}
	return grpcwire.WithPushback(u.invoker(ctx, u.fullMethod, u.req, c.reply, u.cc, opts...), c.trailer)
}

// Took passes the time the engine read for copy n, which ended with err,
// to the endpoint its pick noted. Each copy is told on its own goroutine,
// the one that made it.
func (u *hedgedUnary) Took(n int, err error, took time.Duration) {
	if n == 1 || !u.timed {
		u.unaryCall.Took(n, err, took)
		return
	}
	if c := u.hedge.copies[n-2]; c != nil {
		c.note.Took(pushback.Without(err), took)
	}
}
