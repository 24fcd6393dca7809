package grpcmw

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
	"github.com/meshless/meshless/timeout"
)

// This file is the one place where the order of doc.go is written:
//
//	overall timeout → retry (or hedging) → circuit breaker → rate limiter → adaptive throttler → bulkhead → per-attempt timeout → the call
//
// [method.pipeline] builds an attempt's gates, outer to inner, for the unary,
// stream and server paths alike; [method.run] puts the overall timeout and
// the retry around it for unary calls, and stream.go does the same for
// streams with the same pipeline. A policy joins the order here, once.

// pipeline returns the gates of one attempt in order: circuit breaker →
// rate limiter → adaptive throttler → bulkhead → per-attempt timeout. The
// rate limiter is inside the breaker, so an open breaker spends no quota,
// and outside the throttler and the bulkhead, so a call refused by the
// limit is neither a request to the backend nor holds a slot. The
// throttler is inside the breaker (an open breaker spends nothing and its
// rejections are not requests) and outside the bulkhead (what it rejects
// takes no permit; a bulkhead rejection is not counted by it). Every permit
// they hand out is given back
// by the pipeline on every path, panics included.
func (m *method) pipeline(o *options, perAttempt *timeout.Timeout) *resilience.Pipeline {
	var gates []resilience.Gate
	if m.breaker != nil {
		gates = append(gates, m.breaker)
	}
	if m.limiter != nil {
		gates = append(gates, m.limiter)
	}
	if m.throttler != nil {
		gates = append(gates, m.throttler)
	}
	if m.bulkhead != nil {
		gates = append(gates, m.bulkhead)
	}
	if perAttempt != nil && perAttempt.Duration() > 0 {
		gates = append(gates, perAttempt)
	}
	p, _ := resilience.NewPipeline(m.classes.outcome, o.clock, gates...) // at most 5 gates
	return p
}

// Enter admits an attempt through the breaker; a refusal is the breaker's
// error on the wire.
func (e *breakerEntry) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	ctx, p, err := e.b.Enter(ctx)
	if err != nil {
		return ctx, p, e.rej.wrap(err)
	}
	return ctx, p, nil
}

// Commit lets a half-open probe take a stream's first response as its
// verdict.
func (e *breakerEntry) Commit(ctx context.Context, p resilience.Permit, r resilience.Result) bool {
	return e.b.Commit(ctx, p, r)
}

// Exit records the attempt's result in the breaker.
func (e *breakerEntry) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return e.b.Exit(ctx, p, r)
}

// Enter admits an attempt through the bulkhead; a refusal is the
// bulkhead's error on the wire.
func (e *bulkheadEntry) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	ctx, p, err := e.b.Enter(ctx)
	if err != nil {
		return ctx, p, e.rej.wrap(err)
	}
	return ctx, p, nil
}

// Exit gives the attempt's bulkhead permit back.
func (e *bulkheadEntry) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return e.b.Exit(ctx, p, r)
}

// UnaryClientInterceptor returns the interceptor for unary calls.
func (c *Chain) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, fullMethod string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		m := c.lookupConn(fullMethod, cc)
		if m == nil {
			return invoker(ctx, fullMethod, req, reply, cc, opts...)
		}
		u := unaryCall{fullMethod: fullMethod, req: req, reply: reply, cc: cc, invoker: invoker, opts: opts,
			pushback: m.retry != nil || m.tally != nil}
		return m.run(ctx, &u)
	}
}

// DialOptions returns the dial options that install the chain's
// interceptors and, when the configuration has outlierDetection or
// healthCheck, the default service config that installs the meshless_outlier
// balancer and gRPC's client-side health checking (docs/outlier.md). A
// service config from the resolver (DNS TXT, xDS) overrides the default one
// unless the connection also has grpc.WithDisableServiceConfig.
func (c *Chain) DialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor()),
	}
	sc, _ := c.dialServiceConfig() // validated with the config
	return append(opts, sc...)
}

type unaryCall struct {
	fullMethod string
	req, reply any
	cc         *grpc.ClientConn
	invoker    grpc.UnaryInvoker
	opts       []grpc.CallOption
	pushback   bool
}

// attempt is one attempt of the call. When the method retries or moves the
// retry throttle, it reads the server's pushback from the trailer and hands
// it to the retry policy.
func (u *unaryCall) attempt(ctx context.Context) error {
	if !u.pushback {
		return u.invoker(ctx, u.fullMethod, u.req, u.reply, u.cc, u.opts...)
	}
	var md metadata.MD
	opts := append(u.opts[:len(u.opts):len(u.opts)], grpc.Trailer(&md))
	err := u.invoker(ctx, u.fullMethod, u.req, u.reply, u.cc, opts...)
	return withPushback(err, md)
}

// withPushback attaches the pushback of an attempt's trailer to its error.
// A rejection relayed from a downstream meshless gets none: it is never
// retried and moves no throttle token, whatever the trailer says.
func withPushback(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	if d, ok := pushback(trailer); ok && RejectionReason(err) == "" {
		return &pushbackError{error: err, delay: d}
	}
	return err
}

// withPreviousAttempts returns ctx with the grpc-previous-rpc-attempts
// header of gRFC A6 set to n, the attempts made before this one, replacing
// any value the caller's metadata had.
func withPreviousAttempts(ctx context.Context, n int) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(PreviousAttemptsHeader, strconv.Itoa(n))
	return metadata.NewOutgoingContext(ctx, md)
}

// run runs one unary call: the overall timeout around the retry around the
// attempt pipeline. The overall deadline is set before the first attempt,
// so it bounds everything the call does: local queues, attempts and
// backoffs.
func (m *method) run(ctx context.Context, u *unaryCall) error {
	if m.call == nil {
		return wireError(m.runPolicies(ctx, u))
	}
	start := time.Now()
	err := wireError(m.runPolicies(ctx, u))
	m.call.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Since(start), Err: err,
		Outcome: m.classes.outcome(err), ErrorType: errorType(err)})
	return err
}

func (m *method) runPolicies(ctx context.Context, u *unaryCall) error {
	if m.overall == nil {
		return withoutPushback(m.retried(ctx, u))
	}
	return withoutPushback(m.overall.Execute(ctx, func(ctx context.Context) error { return m.retried(ctx, u) }))
}

// retried runs the attempts while the retry policy allows; a method that
// hedges runs its copies instead (hedge.go), each one attempt. Every attempt
// after the first carries the grpc-previous-rpc-attempts header. A method
// that does not retry still moves the client's retry throttle.
func (m *method) retried(ctx context.Context, u *unaryCall) error {
	if m.hedge != nil {
		return m.hedged(ctx, u)
	}
	if m.retry == nil {
		if m.tally == nil {
			return m.unary.Run(ctx, u.attempt)
		}
		a := m.tally.Begin(ctx)
		err := m.unary.Run(ctx, u.attempt)
		a.Done(err)
		return withoutPushback(err)
	}
	a := m.retry.Begin(ctx)
	var last error
	for {
		actx := ctx
		if n := a.Attempt(); n > 0 {
			actx = withPreviousAttempts(ctx, n)
		}
		err := m.unary.Run(actx, u.attempt)
		wait, again := a.Next(err)
		if !again || !a.Wait(wait) {
			if last != nil && errors.Is(err, throttler.ErrThrottled) {
				// A retry the throttler held back: the caller gets what the
				// backend said, as for a retry the token bucket held back.
				return withoutPushback(last)
			}
			return withoutPushback(err)
		}
		last = err
	}
}

// withoutPushback unwraps the pushback an attempt's error carried to the
// retry policy, so the caller gets the server's error as it came.
func withoutPushback(err error) error {
	if pe, ok := err.(*pushbackError); ok {
		return pe.error
	}
	return err
}
