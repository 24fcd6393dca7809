package grpcmw

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// Server sheds load on the server side: each method's calls pass through the
// bulkhead its configuration resolves to (the bulkhead section, keyed by
// service or by method as circuitBreaker.keyBy says; fixed or adaptive), and
// a call past the limit is answered at once with RESOURCE_EXHAUSTED, the
// ErrorInfo reason BULKHEAD_FULL, and a grpc-retry-pushback-ms trailer. The
// other sections of the configuration are client-side and ignored here.
//
// A meshless client never retries BULKHEAD_FULL; the pushback tells other
// gRPC clients (a service-config retryPolicy) when to come back.
//
// A Server is safe for concurrent use.
type Server struct {
	c        *Chain
	pushback metadata.MD
}

// ServerOption configures a [Server].
type ServerOption interface{ applyServer(*serverOptions) }

type serverOptions struct {
	chain    []Option
	pushback time.Duration
}

type serverOptionFunc func(*serverOptions)

func (f serverOptionFunc) applyServer(o *serverOptions) { f(o) }

// WithPushback sets the delay a shed call asks its client to wait before
// retrying (the grpc-retry-pushback-ms trailer). Default 1s.
func WithPushback(d time.Duration) ServerOption {
	return serverOptionFunc(func(o *serverOptions) { o.pushback = d })
}

// WithServerObserver sends the server's bulkhead events to obs.
func WithServerObserver(obs resilience.Observer) ServerOption {
	return serverOptionFunc(func(o *serverOptions) { o.chain = append(o.chain, WithObserver(obs)) })
}

// NewServer returns the load shedding of cfg (validated as for [New]).
func NewServer(cfg *Config, opts ...ServerOption) (*Server, error) {
	o := serverOptions{pushback: time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt.applyServer(&o)
		}
	}
	if o.pushback < 0 {
		return nil, fmt.Errorf("grpcmw: WithPushback: must not be negative, got %v", o.pushback)
	}
	c, err := New(cfg, append(o.chain, optionFunc(func(co *options) { co.serverSide = true }))...)
	if err != nil {
		return nil, err
	}
	ms := strconv.FormatInt(o.pushback.Milliseconds(), 10)
	return &Server{c: c, pushback: metadata.Pairs(PushbackTrailer, ms)}, nil
}

// UnaryServerInterceptor returns the interceptor for unary calls.
func (s *Server) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var resp any
		var herr error // the handler's, as it returned it
		err, refused := s.c.lookup(info.FullMethod, nil).Serve(ctx, func(ctx context.Context) error {
			resp, herr = handler(ctx, req)
			return forGates(ctx, herr)
		})
		if refused {
			if cerr := ended(ctx, err); cerr != nil {
				return nil, cerr
			}
			_ = grpc.SetTrailer(ctx, s.pushback)
			return resp, err
		}
		return resp, herr
	}
}

// ended returns the status of a call refused because its own context
// ended while it waited for a permit (its deadline passed, or its caller
// cancelled): DEADLINE_EXCEEDED or CANCELLED, as grpc-go ends such a call,
// not the rejection. The call was not shed: its caller gave up, and is no
// longer there to read a pushback. nil when the refusal was the policy's.
func ended(ctx context.Context, err error) error {
	if ctx.Err() == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return nil
	}
	return status.FromContextError(ctx.Err()).Err()
}

// forGates is the handler's error as the server's gates read it: a status
// CANCELLED or DEADLINE_EXCEEDED (the handler's own context ended, or it
// relays a call it made under it) also matches the context's error, and so
// does any answer given once the call's context ctx had ended (its caller
// went away, or its deadline passed, while the handler ran: one that does
// not watch its context answers to no one), so that an adaptive bulkhead
// drops the call's duration, which measured its caller's patience, as a
// client's does and as httpmw's server does for a request whose client went
// away (bulkhead.md, "Which calls are samples"). The handler's caller gets
// its error as it was.
func forGates(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch status.Code(err) {
	case codes.Canceled:
		return fmt.Errorf("%w (%w)", context.Canceled, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// StreamServerInterceptor returns the interceptor for streams: a stream
// holds its permit until its handler returns.
func (s *Server) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var herr error // the handler's, as it returned it
		err, refused := s.c.lookup(info.FullMethod, nil).ServeStream(ss.Context(), func() error {
			herr = handler(srv, ss)
			return forGates(ss.Context(), herr)
		})
		if refused {
			if cerr := ended(ss.Context(), err); cerr != nil {
				return cerr
			}
			ss.SetTrailer(s.pushback)
			return err
		}
		return herr
	}
}

// ServerOptions returns the server options that install both interceptors.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(s.StreamServerInterceptor()),
	}
}

// Reload replaces the configuration, as [Chain.Reload] does.
func (s *Server) Reload(cfg *Config) error { return s.c.Reload(cfg) }

// Close releases the server's observer gauges, as [Chain.Close] does.
func (s *Server) Close() { s.c.Close() }

// Bulkhead returns the bulkhead of key once a call has created it.
func (s *Server) Bulkhead(key string) (*bulkhead.Bulkhead, bool) { return s.c.Bulkhead(key) }
