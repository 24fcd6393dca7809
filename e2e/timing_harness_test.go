package e2e

// The harness of the timing tests (timing_*_test.go): a backend told what to
// answer and after how long, served over gRPC (grpcmw) or HTTP (httpmw) in
// memory, inside a testing/synctest bubble, and the configuration written at
// the level a test names.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/resilience"
)

// What the timing backend answers.
const (
	tOK       = "ok"
	tFail     = "fail"     // UNAVAILABLE, 503: a failure
	tPushback = "pushback" // RESOURCE_EXHAUSTED, 429: a refusal the throttler counts
	tGone     = "gone"     // the call's context ended first: DEADLINE_EXCEEDED or CANCELLED, 504
)

// tAnswer is the backend's next answer: what, after how long.
type tAnswer struct {
	what  string
	delay time.Duration
}

// tBackend answers every call with its current answer.
type tBackend struct {
	mu       sync.Mutex
	ans      tAnswer
	next     *tAnswer    // the answer after the next call's (setNext), if any
	arrivals []time.Time // when each call reached the backend
	handlers sync.WaitGroup
}

// since returns the arrivals from i on, as durations since start.
func (b *tBackend) since(start time.Time, i int) []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []time.Duration
	for _, a := range b.arrivals[min(i, len(b.arrivals)):] {
		out = append(out, a.Sub(start))
	}
	return out
}

func (b *tBackend) set(what string, delay time.Duration) {
	b.mu.Lock()
	b.ans, b.next = tAnswer{what, delay}, nil
	b.mu.Unlock()
}

// setNext makes the answer after the next call's what, after delay: the
// next call (a probe) gets the current answer, every call after it this
// one, however soon after the probe they come (a replay its close set off).
func (b *tBackend) setNext(what string, delay time.Duration) {
	b.mu.Lock()
	b.next = &tAnswer{what, delay}
	b.mu.Unlock()
}

// serve waits the answer's delay (or for ctx) and returns what it is.
func (b *tBackend) serve(ctx context.Context) string {
	b.mu.Lock()
	a := b.ans
	if b.next != nil {
		b.ans, b.next = *b.next, nil
	}
	b.arrivals = append(b.arrivals, time.Now())
	b.mu.Unlock()
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			// Its caller gave up: no answer (an OK here could reach a
			// client whose own timer fires at the same instant first).
			return tGone
		}
	}
	return a.what
}

type tGRPC struct {
	testgrpc.UnimplementedTestServiceServer
	b *tBackend
}

func (g tGRPC) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	g.b.handlers.Add(1)
	defer g.b.handlers.Done()
	switch g.b.serve(ctx) {
	case tGone:
		return nil, status.FromContextError(ctx.Err()).Err()
	case tFail:
		return nil, status.Error(codes.Unavailable, "down")
	case tPushback:
		return nil, status.Error(codes.ResourceExhausted, "busy")
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (b *tBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.handlers.Add(1)
	defer b.handlers.Done()
	switch b.serve(r.Context()) {
	case tGone:
		w.WriteHeader(http.StatusGatewayTimeout)
	case tFail:
		w.WriteHeader(http.StatusServiceUnavailable)
	case tPushback:
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// tRig is one client of the backend.
type tRig struct {
	b *tBackend
	// call makes one call with ctx and names what its caller got: tOK,
	// tFail, tPushback, or "rejected:" and the reason.
	call func(ctx context.Context) string
	// breaker returns the call's breaker (nil before the first call).
	breaker func() *circuitbreaker.Breaker
}

// do sets the backend's answer and makes a call.
func (r tRig) do(what string, delay time.Duration) string {
	r.b.set(what, delay)
	return r.call(context.Background())
}

// state is the breaker's state.
func (r tRig) state() string {
	if cb := r.breaker(); cb != nil {
		return cb.State().String()
	}
	return "none"
}

// rejected names a meshless rejection.
func rejected(err error) (string, bool) {
	if r, ok := resilience.AsRejection(err); ok {
		return "rejected:" + r.RejectedBy().Reason(), true
	}
	return "", false
}

// tLevel is where a test writes the keys it checks.
type tLevel string

const (
	// lvDefaults writes them in defaults.
	lvDefaults tLevel = "defaults"
	// lvMethod writes decoys in defaults and the keys on the gRPC method
	// or the HTTP route, with keyBy: method on its service or host.
	lvMethod tLevel = "method"
)

// tYAML is a configuration: base (written in defaults, common to both
// levels), with section (a mapping's body, "key: value, …") of the policy
// sec written at lv, over decoy written in defaults when lv is lvMethod.
func tYAML(transport string, lv tLevel, base, sec, section, decoy string) string {
	var y strings.Builder
	fmt.Fprintf(&y, "defaults:\n%s\n", indent(base, "  "))
	if lv == lvDefaults {
		fmt.Fprintf(&y, "  %s: { %s }\n", sec, section)
		return y.String()
	}
	if decoy != "" {
		fmt.Fprintf(&y, "  %s: { %s }\n", sec, decoy)
	}
	scope, name, sub, leaf := "services", grpcService, "methods", "UnaryCall"
	if transport == "http" {
		scope, name, sub, leaf = "hosts", httpHost, "routes", `"GET /item/{id}"`
	}
	fmt.Fprintf(&y, "%s:\n  %s:\n    circuitBreaker: { keyBy: method }\n    %s:\n      %s:\n        %s: { %s }\n",
		scope, name, sub, leaf, sec, section)
	return y.String()
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = by + strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

// breakerKey is the name of the call's breaker at lv.
func breakerKey(transport string, lv tLevel) string {
	switch {
	case transport == "grpc" && lv == lvMethod:
		return grpcService + "/UnaryCall"
	case transport == "grpc":
		return grpcService
	case lv == lvMethod:
		return httpHost + "/GET /item/{id}"
	}
	return "_OTHER" // a host the file does not name
}

// inTiming runs f in a synctest bubble with a client of transport ("grpc"
// or "http") built from yml, its breaker the one of lv.
func inTiming(t *testing.T, transport string, lv tLevel, yml string, f func(t *testing.T, r tRig)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		b := &tBackend{}
		lis := memnet.Listen()
		key := breakerKey(transport, lv)
		var r tRig
		r.b = b
		if transport == "grpc" {
			srv := grpc.NewServer()
			testgrpc.RegisterTestServiceServer(srv, tGRPC{b: b})
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(lis) }()
			defer func() { srv.Stop(); <-served }()
			cfg, err := grpcmw.ParseConfig([]byte(yml))
			if err != nil {
				t.Fatalf("%v\n%s", err, yml)
			}
			chain, err := grpcmw.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			conn, err := grpc.NewClient("passthrough:///mem", append(chain.DialOptions(),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := testgrpc.NewTestServiceClient(conn)
			r.call = func(ctx context.Context) string {
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				if c, ok := rejected(err); ok {
					return c
				}
				switch status.Code(err) {
				case codes.OK:
					return tOK
				case codes.Unavailable:
					return tFail
				case codes.ResourceExhausted:
					return tPushback
				}
				return "unexpected:" + err.Error()
			}
			r.breaker = func() *circuitbreaker.Breaker { cb, _ := chain.Breaker(key); return cb }
		} else {
			srv := &http.Server{Handler: b}
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(lis) }()
			defer func() { _ = srv.Close(); <-served }()
			tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
			defer tr.CloseIdleConnections()
			cfg, err := httpmw.ParseConfig([]byte(yml))
			if err != nil {
				t.Fatalf("%v\n%s", err, yml)
			}
			chain, err := httpmw.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			client := chain.Client(tr)
			r.call = func(ctx context.Context) string {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpHost+"/item/7", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if c, ok := rejected(err); ok {
					return c
				}
				if err != nil {
					return "unexpected:" + err.Error()
				}
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					return tOK
				case http.StatusServiceUnavailable:
					return tFail
				case http.StatusTooManyRequests:
					return tPushback
				}
				return fmt.Sprint("unexpected:", resp.StatusCode)
			}
			r.breaker = func() *circuitbreaker.Breaker { cb, _ := chain.Breaker(key); return cb }
		}
		f(t, r)
		synctest.Wait()
		b.handlers.Wait()
	})
}

// forTiming runs f on both transports at both levels.
func forTiming(t *testing.T, f func(t *testing.T, transport string, lv tLevel)) {
	for _, tr := range []string{"grpc", "http"} {
		for _, lv := range []tLevel{lvDefaults, lvMethod} {
			t.Run(tr+"/"+string(lv), func(t *testing.T) { f(t, tr, lv) })
		}
	}
}

// sleepTo moves the bubble's clock to start+at.
func sleepTo(start time.Time, at time.Duration) {
	time.Sleep(time.Until(start.Add(at)))
	synctest.Wait()
}
