package grpcmw_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// Adversarial stress of hedged unary calls through the interceptor, with
// real timers around hedgingDelay, many calls concurrently on one chain:
// the pooled hedgedUnary, the engine's pooled hedgedCall, the policy's
// pooled states and kept timers. Invariants only.

type stressCallKey struct{}

type stressCall struct {
	id       int
	returned atomic.Bool
	started  [6]atomic.Int32
	ended    [6]atomic.Int32
	mu       sync.Mutex
	results  [6]error
	plan     [6]stressPlan
	bad      []string
}

type stressPlan struct {
	wait  time.Duration
	spin  bool
	code  codes.Code
	panic bool
}

func (c *stressCall) fail(format string, args ...any) {
	c.mu.Lock()
	c.bad = append(c.bad, fmt.Sprintf("call %d: ", c.id)+fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func stressCopyOf(ctx context.Context) int {
	md, _ := metadata.FromOutgoingContext(ctx)
	if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 {
		n, _ := strconv.Atoi(v[0])
		return n + 1
	}
	return 1
}

func stressInvoke(ctx context.Context, _ string, _, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	c := ctx.Value(stressCallKey{}).(*stressCall)
	n := stressCopyOf(ctx)
	if n < 1 || n > 5 {
		c.fail("copy %d", n)
		return nil
	}
	if c.returned.Load() {
		c.fail("copy %d started after the call returned", n)
	}
	if c.started[n].Add(1) != 1 {
		c.fail("copy %d started twice", n)
	}
	p := c.plan[n]
	var err error
	if p.code != codes.OK {
		err = status.Error(p.code, fmt.Sprintf("call %d copy %d", c.id, n))
	}
	switch {
	case p.spin:
		end := time.Now().Add(p.wait)
		for time.Now().Before(end) && ctx.Err() == nil {
		}
	case p.wait > 0:
		t := time.NewTimer(p.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			err = status.FromContextError(ctx.Err()).Err()
		}
	}
	if ctx.Err() != nil && err == nil {
		err = status.FromContextError(ctx.Err()).Err()
	}
	tag := fmt.Sprintf("%d/%d", c.id, n)
	if err == nil {
		reply.(*testgrpc.SimpleResponse).Username = tag
	}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = metadata.Pairs("copy", tag)
		case grpc.TrailerCallOption:
			*o.TrailerAddr = metadata.Pairs("copy", tag)
		}
	}
	if c.returned.Load() {
		c.fail("copy %d running after the call returned", n)
	}
	c.mu.Lock()
	c.results[n] = err
	c.mu.Unlock()
	c.ended[n].Add(1)
	if p.panic {
		panic(tag)
	}
	return err
}

func TestHedgedUnaryStress(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		delay      time.Duration
	}{
		{"bulkhead", `
defaults:
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 64 }
  hedging: { maxAttempts: 3, hedgingDelay: 20us, nonFatalStatusCodes: [UNAVAILABLE] }
`, 20 * time.Microsecond},
		{"per-attempt timeout", `
defaults:
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  timeout: { perAttempt: 5s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 64 }
  hedging: { maxAttempts: 4, hedgingDelay: 5us, nonFatalStatusCodes: [UNAVAILABLE] }
`, 5 * time.Microsecond},
		{"waiting bulkhead", `
defaults:
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  timeout: { perAttempt: 5s, overall: 10s }
  bulkhead: { maxConcurrentCalls: 64, maxWaitDuration: 1s }
  hedging: { maxAttempts: 3, hedgingDelay: 50us, nonFatalStatusCodes: [UNAVAILABLE] }
`, 50 * time.Microsecond},
		{"zero delay", `
defaults:
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { enabled: false }
  bulkhead: { maxConcurrentCalls: 64 }
  hedging: { maxAttempts: 3, hedgingDelay: 0s, nonFatalStatusCodes: [UNAVAILABLE] }
`, 20 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain := chainFor(t, tc.yaml)
			icpt := chain.UnaryClientInterceptor()
			const method = "/grpc.testing.TestService/UnaryCall"
			var wg sync.WaitGroup
			var failures atomic.Int32
			report := func(c *stressCall) {
				for _, b := range c.bad {
					if failures.Add(1) < 20 {
						t.Error(b)
					}
				}
			}
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
					for i := range 400 {
						c := &stressCall{id: g*100000 + i}
						for n := 1; n <= 5; n++ {
							p := &c.plan[n]
							switch k := rng.IntN(10); {
							case k < 3:
							case k < 8:
								p.wait = tc.delay/2 + time.Duration(rng.Int64N(int64(tc.delay)*3/2+1))
								p.spin = rng.IntN(2) == 0
							default:
								p.wait = tc.delay * time.Duration(2+rng.IntN(10))
							}
							switch k := rng.IntN(10); {
							case k < 5:
							case k < 8:
								p.code = codes.Unavailable
							default:
								p.code = codes.Internal
							}
							p.panic = rng.IntN(60) == 0
						}
						ctx := context.WithValue(context.Background(), stressCallKey{}, c)
						var header, trailer metadata.MD
						reply := &testgrpc.SimpleResponse{}
						var err error
						pv := recovered(func() {
							err = icpt(ctx, method, &testgrpc.SimpleRequest{}, reply, nil, stressInvoke,
								grpc.Header(&header), grpc.Trailer(&trailer))
						})
						c.returned.Store(true)
						sent := 0
						for n := 1; n <= 5; n++ {
							if s, e := c.started[n].Load(), c.ended[n].Load(); s != e {
								c.fail("copy %d: started %d, ended %d when the call returned", n, s, e)
							}
							if c.started[n].Load() > 0 {
								sent = n
							}
						}
						if pv != nil {
							report(c)
							continue
						}
						c.mu.Lock()
						results := c.results
						c.mu.Unlock()
						if err == nil {
							tag := reply.GetUsername()
							var id, n int
							if _, serr := fmt.Sscanf(tag, "%d/%d", &id, &n); serr != nil || id != c.id || n < 1 || n > sent || results[n] != nil {
								c.fail("succeeded with reply %q (copies %d, results %v)", tag, sent, results)
							} else {
								if h := header.Get("copy"); len(h) != 1 || h[0] != tag {
									c.fail("reply of %s, header %v", tag, header)
								}
								if tr := trailer.Get("copy"); len(tr) != 1 || tr[0] != tag {
									c.fail("reply of %s, trailer %v", tag, trailer)
								}
							}
						} else {
							found := false
							for n := 1; n <= sent; n++ {
								if results[n] != nil && results[n].Error() == err.Error() {
									found = true
								}
							}
							if !found {
								c.fail("error %v, which no copy answered (%v)", err, results)
							}
						}
						report(c)
					}
				}()
			}
			wg.Wait()
			if bh, ok := chain.Bulkhead(testService); ok && bh.Active() != 0 {
				t.Errorf("%d bulkhead permits held after every call", bh.Active())
			}
			// Goroutines: the package's goleak.VerifyTestMain.
		})
	}
}
