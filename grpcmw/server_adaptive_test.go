package grpcmw_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A server's adaptive bulkhead takes no sample from a call whose handler
// answers CANCELLED or DEADLINE_EXCEEDED (its caller gave up: the status a
// handler returns for its own ended context, or relays from a call it made
// with it), as docs/bulkhead.md says the middleware maps those codes: its
// duration measured the caller's patience. Before, only the bare context
// errors were dropped, and a wave of slow CANCELLED answers pulled the
// limit down as if the server had become slow.
func TestAServerAdaptiveBulkheadDropsCancelledAnswers(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		stream bool
	}{{codes.Canceled, false}, {codes.DeadlineExceeded, false}, {codes.Canceled, true}, {codes.DeadlineExceeded, true}} {
		code := tc.code
		name := code.String()
		if tc.stream {
			name += "/stream"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newServer(t, "defaults: { bulkhead: { adaptive: {} } }")
				const method = "/grpc.testing.TestService/UnaryCall"
				run := func(d time.Duration, latency func(time.Duration) time.Duration, answer error) {
					start := time.Now()
					for time.Since(start) < d {
						lat := latency(time.Since(start))
						var wg sync.WaitGroup
						for range 10 {
							wg.Go(func() {
								var err error
								if tc.stream {
									err = srv.StreamServerInterceptor()(nil, &sweepStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: method},
										func(any, grpc.ServerStream) error { time.Sleep(lat); return answer })
								} else {
									_, err = srv.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: method},
										func(context.Context, any) (any, error) { time.Sleep(lat); return nil, answer })
								}
								if status.Code(err) != status.Code(answer) {
									t.Errorf("the handler's %v came back as %v", answer, err)
								}
							})
						}
						wg.Wait()
					}
				}
				run(20*time.Second, func(time.Duration) time.Duration { return 10 * time.Millisecond }, nil)
				b, _ := srv.Bulkhead("grpc.testing.TestService")
				steady := b.Limit()
				rising := func(elapsed time.Duration) time.Duration {
					lat := 10 * time.Millisecond
					for range int(elapsed / time.Second) {
						lat = lat * 12 / 10
					}
					return lat
				}
				run(15*time.Second, rising, status.Error(code, "the caller gave up"))
				if got := b.Limit(); got < steady-1 {
					t.Errorf("limit %d after 15s of slow %v answers, want about %d: they were samples", got, code, steady)
				}
				if b.Active() != 0 {
					t.Errorf("%d permits held", b.Active())
				}
			})
		})
	}
}

// A server's adaptive bulkhead takes no sample from a call whose caller went
// away while its handler ran, whatever the handler answered after (one that
// does not watch its context answers OK, to no one): its duration measured
// the caller's patience, as httpmw's server drops a request whose client
// went away (docs/bulkhead.md, "Which calls are samples"), and as Netflix's
// concurrency-limits ignores a cancelled call. Before, such a call was a
// sample over gRPC and not over HTTP, and the same YAML's limit fell on a
// gRPC server only.
func TestAServerAdaptiveBulkheadDropsCallsWhoseCallerWentAway(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newServer(t, "defaults: { bulkhead: { adaptive: {} } }")
				const method = "/grpc.testing.TestService/UnaryCall"
				run := func(d time.Duration, latency func(time.Duration) time.Duration, gone bool) {
					start := time.Now()
					for time.Since(start) < d {
						lat := latency(time.Since(start))
						var wg sync.WaitGroup
						for range 10 {
							wg.Go(func() {
								ctx, cancel := context.WithCancel(context.Background())
								defer cancel()
								handle := func() {
									time.Sleep(lat)
									if gone {
										cancel() // the caller hangs up; the handler answers OK all the same
									}
								}
								var err error
								if stream {
									err = srv.StreamServerInterceptor()(nil, &sweepStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: method},
										func(any, grpc.ServerStream) error { handle(); return nil })
								} else {
									_, err = srv.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method},
										func(context.Context, any) (any, error) { handle(); return nil, nil })
								}
								if err != nil {
									t.Errorf("the handler's OK came back as %v", err)
								}
							})
						}
						wg.Wait()
					}
				}
				run(20*time.Second, func(time.Duration) time.Duration { return 10 * time.Millisecond }, false)
				b, _ := srv.Bulkhead("grpc.testing.TestService")
				steady := b.Limit()
				rising := func(elapsed time.Duration) time.Duration {
					lat := 10 * time.Millisecond
					for range int(elapsed / time.Second) {
						lat = lat * 12 / 10
					}
					return lat
				}
				run(15*time.Second, rising, true)
				if got := b.Limit(); got < steady-1 {
					t.Errorf("limit %d after 15s of slow calls whose callers went away, want about %d: they were samples", got, steady)
				}
				if b.Active() != 0 {
					t.Errorf("%d permits held", b.Active())
				}
			})
		})
	}
}
