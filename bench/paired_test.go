package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
)

// BenchmarkGRPCUnaryTCPPaired is B5 measured in pairs. Two clients take
// turns call by call in one loop — A B B A A B … — over loopback TCP, so
// that each pair of calls shares the machine's state of that moment: the
// load, the scheduler, the collector, the connection. Separate
// sub-benchmarks (BenchmarkGRPCUnaryTCP) run seconds apart on connections of
// their own, and their rounds move by more than the 3 % target.
//
// One op is one call of each client. Reported: each client's ns per call
// (a, b), the ratio of their totals (b/a, which a few slow calls move) and
// the median of the pairs' ratios (b/a, which they do not: the figure to
// read). Each client calls with context.Background() unless its name says
// it sets a 1 s timeout, as meshless's default per-attempt timeout does.
//
// Every pair but own-conns shares one connection; meshless's client goes
// through the chain's unary interceptor as grpc.ClientConn.Invoke calls it,
// so the interceptor is the only difference.
//
//   - defaults: bare with a 1 s timeout (a) against meshless on defaults (b): B5.
//   - own-conns: the same, each client on a connection of its own, meshless's
//     dialled with chain.DialOptions(), as a user would.
//   - no-timeouts: bare (a) against meshless with its timeouts off (b).
//   - otelmw: bare with a 1 s timeout (a) against meshless on defaults with
//     otelmw and the OpenTelemetry SDK (b).
//
// And four calibrations of the method itself:
//
//   - same-client: bare with a 1 s timeout on both sides; the median is 1
//     if the method favours neither side.
//   - pass-through: bare (a) against an interceptor that only calls the
//     invoker (b).
//   - all-off: the pass-through interceptor (a) against meshless with every
//     policy off (b): what the engine's presence costs a real call.
//   - spin-1us: the pass-through interceptor (a) against one that first
//     computes for about 1 µs (b): what 1 µs of work before a call adds to
//     it on this machine.
func BenchmarkGRPCUnaryTCPPaired(b *testing.B) {
	dial := loopback(b)
	conn := dial(b)
	bare := testgrpc.NewTestServiceClient(conn)
	through, meshless := clientsOn(conn)
	b.Run("defaults", func(b *testing.B) {
		benchPaired(b, withTimeout{bare}, meshless(b, ""))
	})
	b.Run("own-conns", func(b *testing.B) {
		own := testgrpc.NewTestServiceClient(dial(b, newChain(b).DialOptions()...))
		benchPaired(b, withTimeout{testgrpc.NewTestServiceClient(dial(b))}, own)
	})
	b.Run("no-timeouts", func(b *testing.B) {
		benchPaired(b, bare, meshless(b, "defaults: { timeout: { enabled: false } }"))
	})
	b.Run("otelmw", func(b *testing.B) {
		benchPaired(b, withTimeout{bare}, meshless(b, "", grpcmw.WithObserver(sdkObserver(b))))
	})
	b.Run("same-client", func(b *testing.B) {
		benchPaired(b, withTimeout{bare}, withTimeout{bare})
	})
	b.Run("pass-through", func(b *testing.B) {
		benchPaired(b, bare, through(passThrough))
	})
	b.Run("all-off", func(b *testing.B) {
		benchPaired(b, through(passThrough), meshless(b, allOff("")))
	})
	b.Run("spin-1us", func(b *testing.B) {
		benchPaired(b, through(passThrough), through(spinThenInvoke))
	})
}

// BenchmarkGRPCUnaryTCPPairedPolicies is what each policy of the defaults
// adds to a real call, in pairs as BenchmarkGRPCUnaryTCPPaired measures:
// meshless with every policy off (a) against meshless with that one policy
// on, as the defaults set it (b). "timeout" is both timeouts, so its
// figure holds the deadline's own cost, which any client that sets one
// pays: deadline-alone is that cost, a bare client (a) against the same
// with a 1 s timeout (b).
func BenchmarkGRPCUnaryTCPPairedPolicies(b *testing.B) {
	conn := loopback(b)(b)
	_, meshless := clientsOn(conn)
	off := meshless(b, allOff(""))
	b.Run("deadline-alone", func(b *testing.B) {
		bare := testgrpc.NewTestServiceClient(conn)
		benchPaired(b, bare, withTimeout{bare})
	})
	for _, p := range []string{"timeout", "retry", "circuitBreaker", "bulkhead", "adaptiveThrottling"} {
		b.Run(p, func(b *testing.B) {
			benchPaired(b, off, meshless(b, allOff(p)))
		})
	}
}

// allOff is the defaults with every policy off but on, if any.
func allOff(on string) string {
	var y strings.Builder
	y.WriteString("defaults: {")
	for i, p := range []string{"timeout", "retry", "circuitBreaker", "bulkhead", "adaptiveThrottling"} {
		if i > 0 {
			y.WriteString(",")
		}
		fmt.Fprintf(&y, " %s: { enabled: %t }", p, p == on)
	}
	y.WriteString(" }")
	return y.String()
}

// clientsOn returns, on conn, a client through an interceptor, and one
// through a meshless chain built from yaml ("" for the defaults).
func clientsOn(conn *grpc.ClientConn) (
	through func(grpc.UnaryClientInterceptor) testgrpc.TestServiceClient,
	meshless func(b *testing.B, yaml string, opts ...grpcmw.Option) testgrpc.TestServiceClient,
) {
	through = func(ui grpc.UnaryClientInterceptor) testgrpc.TestServiceClient {
		return testgrpc.NewTestServiceClient(intercepted{conn, ui})
	}
	meshless = func(b *testing.B, yaml string, opts ...grpcmw.Option) testgrpc.TestServiceClient {
		var cfg *grpcmw.Config
		if yaml != "" {
			c, err := grpcmw.ParseConfig([]byte(yaml))
			if err != nil {
				b.Fatal(err)
			}
			cfg = c
		}
		chain, err := grpcmw.New(cfg, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return through(chain.UnaryClientInterceptor())
	}
	return through, meshless
}

// benchPaired makes b.N calls on each client, alternating call by call, the
// first of each pair alternating too.
func benchPaired(b *testing.B, ca, cb testgrpc.TestServiceClient) {
	req := &testgrpc.SimpleRequest{}
	call := func(c testgrpc.TestServiceClient) time.Duration {
		start := time.Now()
		if _, err := c.UnaryCall(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	call(ca) // connect, resolve the method
	call(cb)
	var ta, tb time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var da, db time.Duration
		if i%2 == 0 {
			da = call(ca)
			db = call(cb)
		} else {
			db = call(cb)
			da = call(ca)
		}
		ta += da
		tb += db
		ratios = append(ratios, float64(db)/float64(da))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "a-ns/call")
	b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "b-ns/call")
	b.ReportMetric(float64(tb)/float64(ta), "ratio")
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
}

// withTimeout is a client that calls with a 1 s timeout.
type withTimeout struct {
	testgrpc.TestServiceClient
}

func (c withTimeout) UnaryCall(ctx context.Context, in *testgrpc.SimpleRequest, opts ...grpc.CallOption) (*testgrpc.SimpleResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.TestServiceClient.UnaryCall(ctx, in, opts...)
}

// intercepted is a connection whose unary calls go through an interceptor,
// as they do on a grpc.ClientConn dialled with it.
type intercepted struct {
	cc *grpc.ClientConn
	ui grpc.UnaryClientInterceptor
}

func (c intercepted) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ui(ctx, method, args, reply, c.cc, invoke, opts...)
}

func (c intercepted) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.cc.NewStream(ctx, desc, method, opts...)
}

func invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
	return cc.Invoke(ctx, method, req, reply, opts...)
}

func passThrough(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(ctx, method, req, reply, cc, opts...)
}

// spinN is how many steps of a linear congruential generator spinThenInvoke
// computes: about 1 µs on the machine of docs/benchmarks.md
// (BenchmarkSpin measures it).
const spinN = 900

var spinSeed, spinSink uint64 = 1, 0

func spin() {
	x := spinSeed
	for range spinN {
		x = x*6364136223846793005 + 1442695040888963407
	}
	spinSink = x
}

func spinThenInvoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	spin()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// BenchmarkSpin is the work spinThenInvoke adds, alone.
func BenchmarkSpin(b *testing.B) {
	for b.Loop() {
		spin()
	}
}
