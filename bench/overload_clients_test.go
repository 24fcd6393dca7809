package bench

import (
	"context"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/memnet"
)

// The clients of TestGoodputUnderOverload (B10), and the deadline each
// gives a call: TestOverloadClientsDeadlines.

// ovDeadline is the bare client's deadline and meshless's per-attempt
// timeout; twice it, meshless's overall timeout and the other clients'
// caller's deadline.
const ovDeadline = 500 * time.Millisecond

type ovClient struct {
	name string
	// dial returns the dial options of a fresh client (its policies start
	// anew) and whether it sets its own per-attempt deadline.
	dial func(t *testing.T) (opts []grpc.DialOption, ownDeadline bool, done func())
}

// retryServiceConfig is grpc-go's retry, its timeout (the whole call's
// bound) and its optional throttling. grpc-go has no per-attempt timeout:
// "0.5s" bounds the whole call as meshless bounds each attempt, "1s" as
// meshless's overall timeout bounds the call.
const retryServiceConfig = `{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}], "timeout": "%s",
  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"]}}]%s}`

func ovClients() []ovClient {
	return []ovClient{
		{"bare", func(*testing.T) ([]grpc.DialOption, bool, func()) { return nil, false, func() {} }},
		grpcRetry("grpc-go retry", "0.5s", ""),
		grpcRetry("grpc-go retry+throttling", "0.5s", grpcThrottling),
		grpcRetry("grpc-go retry, timeout 1s", "1s", ""),
		grpcRetry("grpc-go retry+throttling, timeout 1s", "1s", grpcThrottling),
		{"failsafe-go", func(*testing.T) ([]grpc.DialOption, bool, func()) {
			rp := failsafegrpc.NewRetryPolicyBuilder[any]().WithMaxAttempts(3).
				WithBackoff(10*time.Millisecond, 100*time.Millisecond).Build()
			cb := fscb.NewBuilder[any]().WithFailureThresholdRatio(50, 100).WithDelay(30 * time.Second).Build()
			bh := fsbulkhead.New[any](100)
			return []grpc.DialOption{grpc.WithUnaryInterceptor(failsafegrpc.NewUnaryClientInterceptorWithExecutor(failsafe.With[any](rp, cb, bh)))}, false, func() {}
		}},
		{"meshless, defaults before issue 10", meshlessClient(`
  circuitBreaker: { failureRateThreshold: 50 }
  adaptiveThrottling: { enabled: false }`)},
		{"meshless", meshlessClient("")}, // last: the target applies to it
	}
}

// grpcThrottling is gRFC A6's example of retry throttling.
const grpcThrottling = `, "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}`

// grpcRetry is a grpc-go client with its own retry, bounded by timeout.
func grpcRetry(name, timeout, throttling string) ovClient {
	return ovClient{name, func(*testing.T) ([]grpc.DialOption, bool, func()) {
		return []grpc.DialOption{grpc.WithDefaultServiceConfig(fmt.Sprintf(retryServiceConfig, timeout, throttling))}, false, func() {}
	}}
}

// meshlessClient is a meshless chain with a user's ordinary settings
// (timeouts, 3 attempts on UNAVAILABLE), extra at the defaults level, and
// the defaults for the rest.
func meshlessClient(extra string) func(t *testing.T) ([]grpc.DialOption, bool, func()) {
	return func(t *testing.T) ([]grpc.DialOption, bool, func()) {
		cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 100ms, retryableStatusCodes: [UNAVAILABLE] }
  timeout: { perAttempt: 500ms, overall: 1s }` + extra + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		chain, err := grpcmw.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return chain.DialOptions(), true, chain.Close
	}
}

// ovCallContext is the context a client's caller passes: none for a
// client that sets its own deadlines (meshless), 500 ms for the bare
// client, and 1 s (meshless's overall timeout) for the others. A grpc-go
// service config's timeout bounds the whole call, retries included, and
// the earlier of the two deadlines applies.
func ovCallContext(name string, ownDeadline bool) (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if ownDeadline {
		return ctx, func() {}
	}
	d := ovDeadline
	if name != "bare" {
		d = 2 * ovDeadline
	}
	return context.WithTimeout(ctx, d)
}

// ovServe serves srv in memory and returns a client of it through c,
// and whether c sets its own deadlines; cleanup ends both.
func ovServe(t *testing.T, c ovClient, srv testgrpc.TestServiceServer) (client testgrpc.TestServiceClient, ownDeadline bool, cleanup func()) {
	lis := memnet.Listen() // not bufconn: see package memnet
	gs := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	opts, ownDeadline, done := c.dial(t)
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	conn, err := grpc.NewClient("passthrough:///mem", opts...)
	if err != nil {
		done()
		gs.Stop()
		t.Fatal(err)
	}
	return testgrpc.NewTestServiceClient(conn), ownDeadline, func() {
		_ = conn.Close()
		done()
		gs.Stop()
	}
}

// stalling is a backend that hangs (answers nothing until the call's
// context ends) or, slow, answers UNAVAILABLE after ovSlowFailure.
type stalling struct {
	testgrpc.UnimplementedTestServiceServer
	slow bool
}

const ovSlowFailure = 400 * time.Millisecond

func (s stalling) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.slow {
		select {
		case <-time.After(ovSlowFailure):
			return nil, status.Error(codes.Unavailable, "slow failure")
		case <-ctx.Done():
		}
	}
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// TestOverloadClientsDeadlines: how long one call of each B10 client lasts,
// in virtual time, against a backend that hangs (the per-attempt bound, or
// the whole call's where there is none) and one that answers UNAVAILABLE
// after 400 ms every time (the whole call's bound: retries until it). grpc-go
// has no per-attempt timeout: its service config's timeout bounds the whole
// call, so the comparison needs a grpc-go client bounded as meshless's
// overall timeout bounds a call (1 s), beside the one bounded as its
// attempts are (500 ms).
func TestOverloadClientsDeadlines(t *testing.T) {
	want := map[string][2]time.Duration{ // hung, slow failure
		"bare":                                 {500 * time.Millisecond, ovSlowFailure},
		"grpc-go retry":                        {500 * time.Millisecond, 500 * time.Millisecond},
		"grpc-go retry+throttling":             {500 * time.Millisecond, 500 * time.Millisecond},
		"grpc-go retry, timeout 1s":            {time.Second, time.Second},
		"grpc-go retry+throttling, timeout 1s": {time.Second, time.Second},
		"failsafe-go":                          {time.Second, time.Second},
		"meshless, defaults before issue 10":   {500 * time.Millisecond, time.Second},
		"meshless":                             {500 * time.Millisecond, time.Second},
	}
	seen := map[string]bool{}
	for _, c := range ovClients() {
		seen[c.name] = true
		w, ok := want[c.name]
		if !ok {
			t.Errorf("client %q: no expected deadlines", c.name)
			continue
		}
		for i, slow := range []bool{false, true} {
			var got time.Duration
			synctest.Test(t, func(t *testing.T) {
				client, own, cleanup := ovServe(t, c, stalling{slow: slow})
				defer cleanup()
				ctx, cancel := ovCallContext(c.name, own)
				defer cancel()
				began := time.Now()
				_, _ = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				got = time.Since(began)
			})
			if got != w[i] {
				t.Errorf("%s, slow failure %v: the call lasted %v, want %v", c.name, slow, got, w[i])
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no client %q among B10's", name)
		}
	}
}
