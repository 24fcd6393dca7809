package httpmw

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// Server sheds load on the server side: each request passes through the
// bulkhead and the rate limiter its host and route resolve to (as a client's
// would: keyed by host, or by route with keyBy: method), and a request past
// either is answered at once, without reaching the handler: 503 Service
// Unavailable (429 Too Many Requests for the rate limiter), Retry-After, the
// reason in [ReasonHeader], and an RFC 9457 application/problem+json body
// that names it. The other sections of the configuration are a client's and
// ignored here. A meshless client never retries such an answer; others
// read Retry-After.
//
// A request whose own context ends while it waits for a permit (its client
// went away, or a deadline an outer middleware set passed) is not shed: it
// is answered 499 Client Closed Request or 504 Gateway Timeout, without
// the reason, and the handler does not run.
//
// A request's host is its Host header; a host the configuration does not
// name gets the defaults' entry, shared by every such host.
//
// A Server is safe for concurrent use.
type Server struct {
	c          *Chain
	retryAfter string
}

// ServerOption configures a [Server].
type ServerOption interface{ applyServer(*serverOptions) }

type serverOptions struct {
	chain      []Option
	retryAfter time.Duration
}

type serverOptionFunc func(*serverOptions)

func (f serverOptionFunc) applyServer(o *serverOptions) { f(o) }

// WithRetryAfter sets the Retry-After a rejected request is answered with,
// in whole seconds, rounded up. Default 1s.
func WithRetryAfter(d time.Duration) ServerOption {
	return serverOptionFunc(func(o *serverOptions) { o.retryAfter = d })
}

// WithServerObserver sends the server's bulkhead and rate limiter events to
// obs.
func WithServerObserver(obs resilience.Observer) ServerOption {
	return serverOptionFunc(func(o *serverOptions) { o.chain = append(o.chain, WithObserver(obs)) })
}

// NewServer returns the load shedding of cfg (validated as for [New]).
func NewServer(cfg *Config, opts ...ServerOption) (*Server, error) {
	o := serverOptions{retryAfter: time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt.applyServer(&o)
		}
	}
	if o.retryAfter < 0 {
		return nil, fmt.Errorf("httpmw: WithRetryAfter: must not be negative, got %v", o.retryAfter)
	}
	c, err := New(cfg, append(o.chain, optionFunc(func(co *options) { co.serverSide = true }))...)
	if err != nil {
		return nil, err
	}
	secs := int64(math.Ceil(o.retryAfter.Seconds()))
	return &Server{c: c, retryAfter: retryAfterValue(secs)}, nil
}

// Handler returns next behind the server's load shedding. A request holds
// its permits until next returns.
func (s *Server) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := s.c.router.Load().match(req)
		m := s.c.e.Lookup(r.key, r.names)
		err, refused := m.Serve(req.Context(), func(ctx context.Context) error {
			if ctx != req.Context() {
				req = req.WithContext(ctx)
			}
			next.ServeHTTP(w, req)
			// A request whose context ended while next ran (its client went
			// away, an outer deadline passed) ended early: the gates drop
			// its duration, which measured its caller's patience, as they
			// do a gRPC server's CANCELLED (bulkhead.md, "Which calls are
			// samples"). net/http ends it only after Handler returns.
			return req.Context().Err()
		})
		if refused {
			if code := ended(req.Context(), err); code != 0 {
				http.Error(w, "meshless: the request's context ended while it waited for a permit: "+req.Context().Err().Error(), code)
				return
			}
			k := resilience.KindOther
			if rj, ok := resilience.AsRejection(err); ok {
				k = rj.RejectedBy()
			}
			if k.Reason() == "" {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			writeRejection(w, k, s.retryAfter)
		}
	})
}

// ended returns the status of a request refused because its own context
// ended while it waited for a permit: 504 Gateway Timeout for a deadline,
// 499 Client Closed Request for a client that went away (as Envoy and
// grpc-gateway map DEADLINE_EXCEEDED and CANCELLED). It was not shed, so
// its answer says nothing of a rejection. 0 when the refusal was the
// policy's.
func ended(ctx context.Context, err error) int {
	switch {
	case ctx.Err() == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return 0
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return config.StatusClientClosedRequest
}

// Reload replaces the configuration, as [Chain.Reload] does.
func (s *Server) Reload(cfg *Config) error { return s.c.Reload(cfg) }

// Close releases the server's observer gauges, as [Chain.Close] does.
func (s *Server) Close() { s.c.Close() }

// Bulkhead returns the bulkhead of key once a request has created it.
func (s *Server) Bulkhead(key string) (*bulkhead.Bulkhead, bool) { return s.c.Bulkhead(key) }

// Limiter returns the rate limiter of key once a request has created it.
func (s *Server) Limiter(key string) (*ratelimiter.Limiter, bool) { return s.c.Limiter(key) }
