package grpcmw

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// HedgingSection is the hedging section, gRFC A6's hedgingPolicy; see
// docs/hedging.md. Like rateLimiter it is off unless some level writes it,
// and it takes retry's place on the methods it covers: an enabled retry
// written for the same method is an error naming both.
type HedgingSection struct {
	Enabled             *bool     `yaml:"enabled,omitempty"`
	MaxAttempts         *int      `yaml:"maxAttempts,omitempty"`
	HedgingDelay        *Duration `yaml:"hedgingDelay,omitempty"`
	NonFatalStatusCodes Codes     `yaml:"nonFatalStatusCodes,omitempty"`
}

// hedgingOn reports whether the levels turn hedging on: one of them writes
// the section, and the last enabled written is not false.
func hedgingOn(levels ...*Policies) bool {
	written, on := false, true
	for _, p := range levels {
		if p == nil || p.Hedging == nil {
			continue
		}
		written = true
		if e := p.Hedging.Enabled; e != nil {
			on = *e
		}
	}
	return written && on
}

// hedgeConfig maps a resolved hedging section onto the policy's config and
// checks it, with its status codes.
func hedgeConfig(h *HedgingSection) (retry.HedgeConfig, error) {
	c := retry.HedgeConfig{MaxAttempts: *h.MaxAttempts, HedgingDelay: h.HedgingDelay.D()}
	errs := []error{c.Validate()}
	if h.NonFatalStatusCodes.has(codes.OK) {
		errs = append(errs, &PathError{Path: "nonFatalStatusCodes", Problem: "OK is not a failure"})
	}
	return c, errors.Join(errs...)
}

// checkHedging refuses hedging and an enabled retry that the configuration
// writes for the same method. A retry left at its built-in default yields
// to hedging.
func checkHedging(levels []level, add func(path, problem string)) {
	ps := make([]*Policies, len(levels))
	for i, l := range levels {
		ps[i] = l.p
	}
	if !hedgingOn(ps...) {
		return
	}
	r := resolve(levels...).Retry
	if !*r.Enabled || *r.MaxAttempts <= 1 {
		return
	}
	hpath, rpath := "", ""
	for _, l := range levels {
		if l.p == nil {
			continue
		}
		if l.p.Hedging != nil {
			hpath = l.path + ".hedging"
		}
		if l.p.Retry != nil {
			rpath = l.path + ".retry"
		}
	}
	if rpath == "" {
		return // the built-in retry: hedging takes its place
	}
	add(hpath, "cannot be used with retry on the same method, and "+rpath+" is enabled for it; set retry: { enabled: false } where hedging is on (hedging takes retry's place)")
}

func (c *Chain) newHedge(st *state, m *method, h *HedgingSection) *retry.Hedge {
	hc, _ := hedgeConfig(h) // validated with the config
	hc.Name = m.name
	for _, code := range h.NonFatalStatusCodes {
		m.nonFatal[code] = true
	}
	opts := []retry.HedgeOption{
		retry.WithHedgeConfig(hc),
		retry.WithNonFatal(m.isNonFatal),
		retry.WithHedgePushback(pushbackOf),
		retry.WithHedgeClock(c.opts.clock),
		retry.WithHedgeObserver(c.opts.observer),
	}
	if st.throttle != nil {
		opts = append(opts, retry.WithHedgeThrottle(st.throttle))
	}
	hd, _ := retry.NewHedge(opts...)
	return hd
}

// isNonFatal: a non-fatal code, and not a rejection a downstream meshless
// made (that is an answer, never hedged); or a copy that its own attempt
// timeout ended: it got no answer, and the copies in flight may still.
func (m *method) isNonFatal(err error) bool {
	var te *timeout.Error
	if errors.As(err, &te) && te.Scope == timeout.Attempt {
		return true
	}
	code, ok := codeOf(err)
	if !ok || int(code) >= len(m.nonFatal) || !m.nonFatal[code] {
		return false
	}
	return RejectionReason(err) == ""
}

// hedgeCopy is one copy's own results: gRPC writes each into it, and the
// winner's are copied to the caller's after every copy has returned.
type hedgeCopy struct {
	reply           proto.Message
	header, trailer metadata.MD
	peer            peer.Peer
}

// hedged runs a unary call under the method's hedging policy: each copy is
// one attempt through the attempt pipeline of order.go (breaker, rate
// limiter, bulkhead, attempt timeout), with its own reply, header, trailer
// and peer, so that copies never write to the same place; the winner's are
// the caller's.
func (m *method) hedged(ctx context.Context, u *unaryCall) error {
	msg, ok := u.reply.(proto.Message)
	if !ok {
		// A reply this package cannot copy (another codec): one attempt.
		return m.unary.Run(ctx, u.attempt)
	}
	var header, trailer *metadata.MD
	var pr *peer.Peer
	opts := make([]grpc.CallOption, 0, len(u.opts)+3)
	for _, o := range u.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			header = o.HeaderAddr
		case grpc.TrailerCallOption:
			trailer = o.TrailerAddr
		case grpc.PeerCallOption:
			pr = o.PeerAddr
		default:
			opts = append(opts, o)
		}
	}
	var copies [retry.MaxHedgedAttempts]hedgeCopy
	// The type, read before any copy runs: copy 1 writes into msg.
	mt := msg.ProtoReflect().Type()
	n, err := m.hedge.Run(ctx, func(ctx context.Context, n int) error {
		c := &copies[n-1]
		c.reply = msg
		if n > 1 {
			c.reply = mt.New().Interface()
			ctx = withPreviousAttempts(ctx, n-1)
		}
		copts := append(opts[:len(opts):len(opts)], grpc.Header(&c.header), grpc.Trailer(&c.trailer))
		if pr != nil {
			copts = append(copts, grpc.Peer(&c.peer))
		}
		return m.unary.Run(ctx, func(ctx context.Context) error {
			err := u.invoker(ctx, u.fullMethod, u.req, c.reply, u.cc, copts...)
			if err != nil {
				if d, ok := pushback(c.trailer); ok {
					return &pushbackError{error: err, delay: d}
				}
			}
			return err
		})
	})
	if n > 0 {
		w := &copies[n-1]
		if n > 1 && err == nil {
			proto.Reset(msg)
			proto.Merge(msg, w.reply)
		}
		if header != nil {
			*header = w.header
		}
		if trailer != nil {
			*trailer = w.trailer
		}
		if pr != nil {
			*pr = w.peer
		}
	}
	return withoutPushback(err)
}
