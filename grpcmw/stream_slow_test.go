package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/circuitbreaker"
)

// A stream is slow, for the breaker, when its server is slow to answer it
// (its first response, or its header, comes after slowCallDurationThreshold),
// not when it lives long: before, every stream that lived past 2s (a watch,
// a subscription, a chat) counted as a slow call, so that on the defaults
// 20 healthy watches of a service opened its breaker (slow_call_rate 100 %)
// and its unary calls were refused with CIRCUIT_OPEN.
func TestALongLivedStreamIsNotASlowCall(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"retrying", "defaults: {}\n"},
		{"hedged", "defaults: { retry: { enabled: false }, hedging: { hedgingDelay: 1h } }\n"},
		{"bidi", "defaults: {}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				var late atomic.Int64 // how long the server waits before its first response
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					time.Sleep(time.Duration(late.Load()))
					_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
					time.Sleep(time.Minute) // a watch: it lives on
					return nil
				})
				bidi := func(s testgrpc.TestService_FullDuplexCallServer) error {
					time.Sleep(time.Duration(late.Load()))
					_ = s.Send(&testgrpc.StreamingOutputCallResponse{})
					time.Sleep(time.Minute)
					return nil
				}
				f.bidi.Store(&bidi)
				client, chain, metrics, stop := observed(t, f, tc.yaml)
				defer stop()
				e := &matrixEnv{f: f, client: client, chain: chain, metrics: metrics}
				run := func(n int) outcomes {
					if tc.name == "bidi" {
						return e.bidis(context.Background(), n)
					}
					return e.streams(context.Background(), n)
				}
				if got := run(25); got["OK"] != 25 {
					t.Errorf("25 watches that answered at once, each a minute long = %v, want 25 OK", got)
				}
				cb := e.breaker(t)
				if m := cb.Metrics(); cb.State() != circuitbreaker.StateClosed || m.SlowCalls != 0 {
					t.Errorf("breaker %v with %d slow calls of %d after watches that answered at once", cb.State(), m.SlowCalls, m.Calls)
				}
				// A server slow to answer a stream is slow all the same.
				late.Store(int64(3 * time.Second))
				if got := run(20); got["OK"] != 20 {
					t.Errorf("20 streams answered after 3s = %v, want 20 OK", got)
				}
				if m := cb.Metrics(); m.SlowCalls != 20 {
					t.Errorf("breaker counted %d slow calls of %d, want the 20 streams answered after 3s", m.SlowCalls, m.Calls)
				}
			})
		})
	}
}
