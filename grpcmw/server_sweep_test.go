package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

func sweepReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ""
}

type sweepStream struct {
	grpc.ServerStream
	ctx     context.Context
	trailer metadata.MD
}

func (s *sweepStream) Context() context.Context  { return s.ctx }
func (s *sweepStream) SetTrailer(md metadata.MD) { s.trailer = metadata.Join(s.trailer, md) }

// A sweep of grpcmw's Server, unary and stream, on its interceptors: each
// gate at its edge, enforce and observe, against each thing a handler
// does, the gate free and full. Only the server's rejections carry a
// reason; every permit comes back, panics too.
func TestGRPCServerSweep(t *testing.T) {
	gates := []struct {
		name, yaml string
		code       codes.Code
		reason     string
		limiter    bool
	}{
		{"bulkhead-1", "bulkhead: { maxConcurrentCalls: 1 }", codes.ResourceExhausted, "BULKHEAD_FULL", false},
		{"bulkhead-1-wait", "bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 50ms }", codes.ResourceExhausted, "BULKHEAD_FULL", false},
		{"ratelimiter-1", "bulkhead: { maxConcurrentCalls: 100 }, rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }", codes.ResourceExhausted, "RATE_LIMITED", true},
	}
	handlers := []struct {
		name  string
		err   error
		panic bool
	}{
		{"ok", nil, false},
		{"not-found", status.Error(codes.NotFound, "no"), false},
		{"internal", status.Error(codes.Internal, "boom"), false},
		{"panic", nil, true},
	}
	for _, g := range gates {
		for _, mode := range []string{"", "mode: observe, "} {
			for _, hb := range handlers {
				for _, stream := range []bool{false, true} {
					name := g.name + "/" + mode + hb.name
					if stream {
						name += "/stream"
					}
					t.Run(name, func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) {
							srv := newServer(t, "defaults: { "+mode+g.yaml+" }")
							hold, release := make(chan struct{}), make(chan struct{})
							body := func(holding bool) error {
								if holding {
									close(hold)
									<-release
									return nil
								}
								if hb.panic {
									panic("boom")
								}
								return hb.err
							}
							const method = "/grpc.testing.TestService/UnaryCall"
							call := func(holding bool) (err error, panicked bool, trailer metadata.MD) {
								defer func() {
									if p := recover(); p != nil {
										panicked = true
									}
								}()
								if stream {
									ss := &sweepStream{ctx: context.Background()}
									err = srv.StreamServerInterceptor()(nil, ss, &grpc.StreamServerInfo{FullMethod: method}, func(any, grpc.ServerStream) error { return body(holding) })
									return err, false, ss.trailer
								}
								_, err = srv.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, body(holding) })
								return err, false, nil
							}
							check := func(err error, p bool, what string) {
								t.Helper()
								if p != hb.panic {
									t.Errorf("%s: panicked %v, want %v", what, p, hb.panic)
								}
								if !p && status.Code(err) != status.Code(hb.err) {
									t.Errorf("%s: %v, want %v", what, err, hb.err)
								}
								if r := sweepReason(err); r != "" {
									t.Errorf("%s: the handler's answer carries reason %s", what, r)
								}
							}
							err, p, _ := call(false)
							check(err, p, "free")
							if !g.limiter {
								go call(true)
								<-hold
							}
							err, p, tr := call(false)
							if mode == "" {
								if p || status.Code(err) != g.code || sweepReason(err) != g.reason || (stream && len(tr.Get(grpcmw.PushbackTrailer)) != 1) {
									t.Errorf("full: panicked %v, %v (reason %q), trailer %v", p, err, sweepReason(err), tr)
								}
							} else {
								check(err, p, "full, observed")
							}
							if !g.limiter {
								close(release)
								synctest.Wait()
							}
							if b, ok := srv.Bulkhead("grpc.testing.TestService"); !ok || b.Active() != 0 {
								t.Errorf("bulkhead %v, permits held", ok)
							}
						})
					})
				}
			}
		}
	}
}

// A reload of the server's bulkhead while a call waits in its queue: the
// waiting call is admitted when the holder leaves (on the bulkhead it
// queued on), a new call takes the new bulkhead at once, and every permit
// of both comes back.
func TestGRPCServerReloadWhileQueued(t *testing.T) {
	for _, to := range []string{
		"bulkhead: { maxConcurrentCalls: 2, maxWaitDuration: 1s }",
		"mode: observe, bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 1s }",
		"bulkhead: { maxConcurrentCalls: 1 }",
	} {
		t.Run(to, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newServer(t, "defaults: { bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 1s } }")
				const method = "/grpc.testing.TestService/UnaryCall"
				call := func(h func() error) error {
					_, err := srv.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, h() })
					return err
				}
				hold, release := make(chan struct{}), make(chan struct{})
				go call(func() error { close(hold); <-release; return nil })
				<-hold
				old, _ := srv.Bulkhead("grpc.testing.TestService")
				waited := make(chan error, 1)
				ran := false
				go func() { waited <- call(func() error { ran = true; return nil }) }()
				synctest.Wait() // queued
				cfg2, err := grpcmw.ParseConfig([]byte("defaults: { " + to + " }"))
				if err != nil {
					t.Fatal(err)
				}
				if err := srv.Reload(cfg2); err != nil {
					t.Fatal(err)
				}
				close(release)
				if err := <-waited; err != nil || !ran {
					t.Errorf("the queued call: %v, ran %v", err, ran)
				}
				if err := call(func() error { return nil }); err != nil {
					t.Errorf("a call after the reload: %v", err)
				}
				synctest.Wait()
				cur, _ := srv.Bulkhead("grpc.testing.TestService")
				if old.Active() != 0 || cur.Active() != 0 {
					t.Errorf("permits held: old %d, new %d", old.Active(), cur.Active())
				}
			})
		})
	}
}

// newServer is a Server of the configuration yaml, closed when the test
// ends.
func newServer(t *testing.T, yaml string, opts ...grpcmw.ServerOption) *grpcmw.Server {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcmw.NewServer(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
