package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
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
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/difftest"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// rdBackend is the server below the chains of
// TestAReloadedGRPCChainBehavesAsOneBuiltFresh: every method of every
// service, unary or streaming, answers the code its request's payload
// names, after the delay it names (or its context's end), and a streaming
// call sends one message first. It counts the attempts.
type rdBackend struct {
	mu sync.Mutex
	n  map[string]int64 // by service
}

// attempts returns the attempts svc's methods have seen.
func (b *rdBackend) attempts(svc string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[svc]
}

func (b *rdBackend) handle(_ any, ss grpc.ServerStream) error {
	full, _ := grpc.MethodFromServerStream(ss)
	svc, _, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	b.mu.Lock()
	b.n[svc]++
	b.mu.Unlock()
	req := new(testgrpc.SimpleRequest)
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	var code, ms int
	_, _ = fmt.Sscanf(string(req.GetPayload().GetBody()), "%d %d", &code, &ms)
	if ms > 0 {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		select {
		case <-t.C:
		case <-ss.Context().Done():
			t.Stop()
			return status.FromContextError(ss.Context().Err()).Err()
		}
	}
	if codes.Code(code) != codes.OK {
		return status.Error(codes.Code(code), "scripted")
	}
	return ss.SendMsg(&testgrpc.SimpleResponse{})
}

// rdCall is one call (or burst of calls) of a script: its service and
// method, unary or a server stream, the code the backend answers and
// after how long, and the time the script waits before it.
type rdCall struct {
	svc, method string
	stream      bool
	code, delay int // delay in ms
	burst       int
	gap         time.Duration
}

// rdService is one service of the generated configurations, varying one
// section (diffSection's meaning, as httpmw's differential test).
type rdService struct {
	name     string
	methods  []string // unary methods
	streams  []string // streaming methods ("FullDuplexCall" bidirectional)
	variants []rdSection
	// okBefore: the script before the reload makes only calls answered OK
	// at once of this service (a dead-letter queue's entries and replays
	// before the reload are A's, which a chain built from B cannot make);
	// when the section changed, the fresh chain plays none of them and the
	// reloaded chain's breaker is reset after the reload: the key's queue
	// is then made anew at its first call in both, its replay rounds (10 s
	// from the queue's making) in step.
	okBefore bool
}

type rdSection struct {
	yaml, keep string
	stateless  bool
	lazy       bool
}

var rdServices = []rdService{
	{"grpc.testing.ReconnectService", []string{"Start", "Stop"}, nil, []rdSection{
		{yaml: "circuitBreaker: { enabled: true, slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 20s }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureRateThreshold: 40, waitDurationInOpenState: 20s }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 3, waitDurationInOpenState: 5s, permittedNumberOfCallsInHalfOpenState: 1 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 6, minimumNumberOfCalls: 3, waitDurationInOpenState: 20s }", keep: "c6"},
		{yaml: "", keep: "none"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, mode: FORCED_OPEN }", keep: "c4 forced"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, keyBy: method, waitDurationInOpenState: 20s }", keep: "c4 method"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, keyBy: method, waitDurationInOpenState: 20s }\n    methods: { Start: { circuitBreaker: { minimumNumberOfCalls: 2 } } }", keep: "c4 method"},
		{yaml: "circuitBreaker: { slidingWindowType: TIME_BASED, slidingWindowSize: 10, minimumNumberOfCalls: 3 }", keep: "t10"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureStatusCodes: [INTERNAL] }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, slowCallDurationThreshold: 1s, slowCallRateThreshold: 50 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, failureStatusCodes: [INTERNAL], ignoredStatusCodes: [UNAVAILABLE] }\n    retry: { maxAttempts: 3, initialBackoff: 2s, jitter: 0 }", keep: "c4"},
	}, false},
	{"grpc.testing.TestService", []string{"UnaryCall", "EmptyCall"}, []string{"StreamingOutputCall", "FullDuplexCall"}, []rdSection{
		{yaml: "retry: { maxAttempts: 3, initialBackoff: 100ms, jitter: 0 }", stateless: true},
		{yaml: "retry: { maxAttempts: 2, initialBackoff: 1s, jitter: 0 }", stateless: true},
		{yaml: "hedging: { maxAttempts: 2, hedgingDelay: 500ms }", stateless: true},
		{yaml: "retry: { maxAttempts: 3, initialBackoff: 100ms, jitter: 0 }\n    methods: { EmptyCall: { retry: { enabled: false } }, StreamingOutputCall: { hedging: { maxAttempts: 3, hedgingDelay: 300ms } }, FullDuplexCall: { retry: { maxAttempts: 2, initialBackoff: 1s, jitter: 0 } } }", stateless: true},
		{yaml: "timeout: { perAttempt: 1s }\n    retry: { maxAttempts: 2, initialBackoff: 200ms, jitter: 0 }", stateless: true},
		{yaml: "mode: observe\n    hedging: { maxAttempts: 3, hedgingDelay: 700ms }\n    timeout: { perAttempt: 2s }", stateless: true},
		{yaml: "", stateless: true},
	}, false},
	{"grpc.testing.LoadBalancerStatsService", []string{"GetClientStats", "GetClientAccumulatedStats"}, nil, []rdSection{
		{yaml: "timeout: { perAttempt: 1s }", stateless: true},
		{yaml: "timeout: { perAttempt: 3s, overall: 5s }", stateless: true},
		{yaml: "timeout: { overall: 1500ms }\n    methods: { GetClientStats: { timeout: { overall: 10s } } }", stateless: true},
	}, false},
	{"grpc.testing.XdsUpdateHealthService", []string{"SetServing", "SetNotServing"}, nil, []rdSection{
		{yaml: "bulkhead: { maxConcurrentCalls: 1 }", keep: "1", lazy: true},
		{yaml: "bulkhead: { maxConcurrentCalls: 5 }", keep: "5", lazy: true},
		{yaml: "", keep: "none", lazy: true},
		{yaml: "bulkhead: { adaptive: { initialLimit: 4, maxLimit: 10 } }", keep: "a", lazy: true},
		{yaml: "bulkhead: { maxConcurrentCalls: 2, maxWaitDuration: 500ms }", keep: "2w", lazy: true},
		{yaml: "mode: observe\n    bulkhead: { maxConcurrentCalls: 1 }", keep: "1o", lazy: true},
	}, false},
	{"grpc.testing.HookService", []string{"Hook", "SetReturnStatus"}, nil, []rdSection{
		{yaml: "rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 1h }", keep: "3/1h", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 5, limitRefreshPeriod: 1h }", keep: "5/1h", lazy: true},
		{yaml: "", keep: "none", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 10s }", keep: "3/10s", lazy: true},
		{yaml: "rateLimiter: { limitForPeriod: 2, limitRefreshPeriod: 5s, timeoutDuration: 3s }", keep: "2/5s", lazy: true},
	}, false},
	// A service no descriptor linked into the program declares: a method
	// the YAML does not name runs on its service's entry (OtherMethod), and
	// once the service is removed on the defaults' ("_OTHER/_OTHER"), so
	// its key goes.
	{"example.Unlinked", []string{"Get", "Put"}, nil, []rdSection{
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, waitDurationInOpenState: 20s }", keep: "c4"},
		{yaml: "", keep: "none"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 3, waitDurationInOpenState: 20s }\n    methods: { Get: { timeout: { perAttempt: 2s } } }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2, keyBy: method, waitDurationInOpenState: 20s }\n    methods: { Get: {} }", keep: "c4 method"},
	}, false},
	// Dead-letter queues, one section in each chain's own directory: the
	// entries of A's queue stay in the store (reload.md), so the script
	// before the reload defers nothing; the queue is built under A and
	// takes B's settings at the key's next call (lazy). A change of "on"
	// alone keeps the queue (the method decides what defers): its replay
	// rounds keep their time.
	{"grpc.testing.XdsUpdateClientConfigureService", []string{"Configure"}, nil, []rdSection{
		{yaml: rdDLBreaker + "\n    deadLetter: { path: {DL}/a.db }", keep: "d0", lazy: true},
		{yaml: rdDLBreaker + "\n    deadLetter: { path: {DL}/a.db, maxEntries: 2 }", keep: "d1", lazy: true},
		{yaml: rdDLBreaker + "\n    deadLetter: { path: {DL}/a.db, on: [CIRCUIT_OPEN, RETRIES_EXHAUSTED] }", keep: "d0", lazy: true},
		{yaml: rdDLBreaker + "\n    deadLetter: { path: {DL}/a.db, maxReplays: 1 }", keep: "d3", lazy: true},
		{yaml: rdDLBreaker + "\n    deadLetter: { path: {DL}/b.db, replayRate: 1 }", keep: "d4", lazy: true},
		{yaml: rdDLBreaker + "\n    deadLetter: { enabled: false }", keep: "d5", lazy: true},
		{yaml: rdDLBreaker, keep: "d6", lazy: true},
	}, true},
	{"grpc.testing.UnimplementedService", []string{"UnimplementedCall"}, nil, []rdSection{
		{yaml: "mode: observe\n    circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }", keep: "c4"},
		{yaml: "circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 2 }", keep: "c4"},
	}, false},
}

const rdDLBreaker = "circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, waitDurationInOpenState: 4s, permittedNumberOfCallsInHalfOpenState: 1 }"

const rdBase = "defaults:\n  adaptiveThrottling: { enabled: false }\n  retry: { enabled: false }\n  circuitBreaker: { enabled: false }\n" +
	"retryThrottling: { maxTokens: 1000, tokenRatio: 1 }\nservices:\n"

// rdYAML is the configuration that gives service i its variant pick[i].
func rdYAML(svcs []rdService, pick []int) string {
	var b strings.Builder
	b.WriteString(rdBase)
	for i, s := range svcs {
		if y := s.variants[pick[i]].yaml; y != "" { // "": the service is not in the YAML
			fmt.Fprintf(&b, "  %s:\n    %s\n", s.name, y)
		}
	}
	return b.String()
}

func rdScript(r *rand.Rand, svcs []rdService, n int, before bool) []rdCall {
	cs := []codes.Code{codes.OK, codes.OK, codes.NotFound, codes.Internal, codes.Unavailable, codes.Unavailable}
	delays := []int{0, 0, 0, 1201, 2503}
	gaps := []time.Duration{0, 0, 100 * time.Millisecond, time.Second, 6 * time.Second, 25 * time.Second}
	s := make([]rdCall, n)
	for i := range s {
		svc := svcs[r.IntN(len(svcs))]
		c := rdCall{svc: svc.name, method: svc.methods[r.IntN(len(svc.methods))],
			code: int(cs[r.IntN(len(cs))]), delay: delays[r.IntN(len(delays))], gap: gaps[r.IntN(len(gaps))]}
		if len(svc.streams) > 0 && r.IntN(3) == 0 {
			c.method, c.stream = svc.streams[r.IntN(len(svc.streams))], true
		}
		if r.IntN(4) == 0 {
			c.burst, c.delay = 2+r.IntN(5), 301+r.IntN(3)*1000
		}
		if before && svc.okBefore {
			c.code, c.delay, c.burst, c.stream, c.method = int(codes.OK), 0, 0, false, svc.methods[0]
		}
		// A jitter of a few microseconds keeps a call clear of a timer due
		// at the same instant (httpmw's differential test says why).
		c.gap += time.Duration(1+r.IntN(1e6)) * time.Nanosecond
		s[i] = c
	}
	return s
}

// rdChain is a chain (or a server) under test with its backend.
type rdChain struct {
	chain    *grpcmw.Chain
	srv      *grpcmw.Server
	conn     *grpc.ClientConn
	back     *rdBackend
	obs      *resiliencetest.Observer
	released *rdReleases
	dir      string // the dead-letter stores' ({DL} in the YAML)
}

type rdReleases struct {
	mu    sync.Mutex
	names []string
}

func (r *rdReleases) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.names
	r.names = nil
	return n
}

type rdRecorder struct {
	resilience.Recorder
	r    *rdReleases
	name string
}

func (rr rdRecorder) Release() {
	rr.r.mu.Lock()
	defer rr.r.mu.Unlock()
	rr.r.names = append(rr.r.names, rr.name)
}

func newRDChain(t *testing.T, yaml string, server bool) *rdChain {
	t.Helper()
	d := &rdChain{back: &rdBackend{n: map[string]int64{}}, obs: &resiliencetest.Observer{}, released: &rdReleases{}, dir: t.TempDir()}
	yaml = strings.ReplaceAll(yaml, "{DL}", d.dir)
	o := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return rdRecorder{Recorder: d.obs.Attach(src), r: d.released, name: src.Kind.String() + " " + src.Name}
	})
	cfg, err := grpcmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	srvOpts := []grpc.ServerOption{grpc.UnknownServiceHandler(d.back.handle)}
	var dialOpts []grpc.DialOption
	if server {
		if d.srv, err = grpcmw.NewServer(cfg, grpcmw.WithServerObserver(o)); err != nil {
			t.Fatal(err)
		}
		srvOpts = append(srvOpts, d.srv.ServerOptions()...)
	} else {
		if d.chain, err = grpcmw.New(cfg, grpcmw.WithObserver(o)); err != nil {
			t.Fatal(err)
		}
		dialOpts = d.chain.DialOptions()
	}
	lis := memnet.Listen()
	gs := grpc.NewServer(srvOpts...)
	go func() { _ = gs.Serve(lis) }()
	d.conn, err = grpc.NewClient("passthrough:///mem", append(dialOpts,
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.conn.Close()
		gs.Stop()
		if d.srv != nil {
			d.srv.Close()
		} else {
			d.chain.Close()
		}
	})
	return d
}

// breaker returns key's breaker (none on a server).
func (d *rdChain) breaker(key string) (*circuitbreaker.Breaker, bool) {
	if d.chain == nil {
		return nil, false
	}
	return d.chain.Breaker(key)
}

func (d *rdChain) reload(cfg *grpcmw.Config) error {
	if d.srv != nil {
		return d.srv.Reload(cfg)
	}
	return d.chain.Reload(cfg)
}

// events returns, sorted, the events the observer received since the
// last call (but those of the services in skip), and forgets them.
func (d *rdChain) events(skip map[string]bool) []string { return difftest.Events(d.obs, skip) }

func (d *rdChain) play(c rdCall) string {
	return difftest.Burst(c.burst, func() string { return d.one(c) })
}

// one makes c's call and describes its answer: code, rejection, message,
// attempts the backend saw (but in a burst), time taken.
func (d *rdChain) one(c rdCall) string {
	ctx := context.Background()
	req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(fmt.Sprintf("%d %d", c.code, c.delay))}}
	full := "/" + c.svc + "/" + c.method
	before, start := d.back.attempts(c.svc), time.Now()
	var err error
	if c.stream {
		err = rdStream(ctx, d.conn, full, req)
	} else {
		err = d.conn.Invoke(ctx, full, req, new(testgrpc.SimpleResponse))
	}
	st := status.Convert(err)
	// The message's class: the backend's, or meshless's own without the
	// error it wraps (gRPC words a cancelled attempt's end in more than one
	// way, by a race of its own).
	msg, _, _ := strings.Cut(st.Message(), ": rpc error")
	msg = rdReplayID.ReplaceAllString(msg, "replay id …") // random
	res := st.Code().String() + " " + grpcmw.RejectionReason(err) + " " + strconv.Quote(msg)
	took := time.Since(start)
	if c.burst > 1 {
		return fmt.Sprintf("%s: %s in %v", full, res, took)
	}
	return fmt.Sprintf("%s: %s after %d attempts in %v", full, res, d.back.attempts(c.svc)-before, took)
}

var rdReplayID = regexp.MustCompile(`replay id [0-9a-f]+`)

// rdStream makes a streaming call (bidirectional for FullDuplexCall, else
// server-streaming), sends req, and reads the stream to its end.
func rdStream(ctx context.Context, conn *grpc.ClientConn, method string, req *testgrpc.SimpleRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: strings.HasSuffix(method, "/FullDuplexCall")}
	cs, err := conn.NewStream(ctx, desc, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		if err := cs.RecvMsg(new(testgrpc.SimpleResponse)); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func rdPlayBoth(x, y *rdChain, c rdCall) (gx, gy string) {
	done := make(chan struct{})
	go func() { defer close(done); gy = y.play(c) }()
	gx = x.play(c)
	<-done
	return gx, gy
}

// state describes the breakers and the bulkheads holding permits of the
// keys of service s.
func (d *rdChain) state(s rdService) string {
	var b strings.Builder
	keys := []string{s.name, s.name + "/" + grpcmw.OtherMethod}
	for _, m := range append(slices.Clone(s.methods), s.streams...) {
		keys = append(keys, s.name+"/"+m)
	}
	for _, k := range keys {
		if d.srv != nil {
			if bh, ok := d.srv.Bulkhead(k); ok && bh.Active() > 0 {
				fmt.Fprintf(&b, "[%s bulkhead limit %d active %d]", k, bh.Limit(), bh.Active())
			}
			continue
		}
		if cb, ok := d.chain.Breaker(k); ok {
			m := cb.Metrics()
			fmt.Fprintf(&b, "[%s breaker %v calls %d failed %d slow %d refused %d]", k, m.State, m.Calls, m.FailedCalls, m.SlowCalls, m.NotPermittedCalls)
		}
		if bh, ok := d.chain.Bulkhead(k); ok && bh.Active() > 0 {
			fmt.Fprintf(&b, "[%s bulkhead limit %d active %d]", k, bh.Limit(), bh.Active())
		}
	}
	return b.String()
}

// A gRPC chain reloaded from configuration A to B behaves as a chain built
// fresh from B, but for the state docs/reload.md says a reload carries
// over: httpmw's TestAReloadedChainBehavesAsOneBuiltFresh on gRPC, with
// services for hosts, methods (and per-method overrides) for routes,
// server streams next to unary calls, and a service removed from the YAML
// whose descriptor is linked in (its methods run on the defaults, under
// the same key). Every call is compared: code, rejection, message,
// attempts the backend saw, time on the bubble's clock; and the breakers'
// metrics and the observer's events.
func TestAReloadedGRPCChainBehavesAsOneBuiltFresh(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	rdReloadDiff(t, rdServices, false, 0, seeds)
}

// The same for a Server, whose calls pass a bulkhead and a rate limiter
// only.
func TestAReloadedGRPCServerBehavesAsOneBuiltFresh(t *testing.T) {
	seeds := 16
	if testing.Short() {
		seeds = 8
	}
	rdReloadDiff(t, []rdService{rdServices[3], rdServices[4]}, true, 0, seeds)
}

func rdReloadDiff(t *testing.T, svcs []rdService, server bool, from, seeds int) {
	for seed := from; seed < from+seeds; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		a, b := make([]int, len(svcs)), make([]int, len(svcs))
		for i, s := range svcs {
			a[i], b[i] = r.IntN(len(s.variants)), r.IntN(len(s.variants))
			if r.IntN(3) == 0 {
				b[i] = a[i]
			}
		}
		if seed%8 == 0 {
			copy(b, a)
		}
		back := seed%5 == 1
		invalid := seed%7 == 3 && !back
		if invalid {
			copy(b, a)
		}
		pre, post := rdScript(r, svcs, 14, true), rdScript(r, svcs, 18, false)
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				final := b
				if back {
					final = a
				}
				x, y := newRDChain(t, rdYAML(svcs, a), server), newRDChain(t, rdYAML(svcs, final), server)
				kept := map[string]bool{}
				for i, s := range svcs {
					va, vb := s.variants[a[i]], s.variants[b[i]]
					kept[s.name] = !back && va.keep == vb.keep && !va.stateless ||
						back && !va.stateless && (va.lazy && vb.yaml != "" || va.keep == vb.keep)
				}
				for _, c := range pre {
					time.Sleep(c.gap)
					if kept[c.svc] {
						rdPlayBoth(x, y, c)
					} else {
						x.play(c)
					}
				}
				if invalid {
					bad, err := grpcmw.ParseConfig([]byte(strings.ReplaceAll(rdYAML(svcs, a), "{DL}", x.dir)))
					if err != nil {
						t.Fatal(err)
					}
					if bad.Services == nil {
						bad.Services = map[string]*config.Service{}
					}
					bad.Services["no such/service"] = &config.Service{} // as a program may build it
					if err := x.reload(bad); err == nil {
						t.Fatal("Reload of an invalid configuration succeeded")
					}
				} else {
					rdReload(t, x, rdYAML(svcs, b))
				}
				if back {
					rdReload(t, x, rdYAML(svcs, a))
				}
				for _, s := range svcs {
					if cb, ok := x.breaker(s.name); ok && s.okBefore && !kept[s.name] {
						cb.Reset()
					}
				}
				if gone := x.released.take(); slices.Equal(a, b) && !back && len(gone) > 0 {
					t.Errorf("a reload that changed nothing released the gauges of %q", gone)
				}
				skip := map[string]bool{}
				for i, s := range svcs {
					va, vb := s.variants[a[i]], s.variants[final[i]]
					if kept[s.name] && (va.yaml != vb.yaml || back && va.yaml != s.variants[b[i]].yaml) {
						if sx := x.state(s); sx != y.state(s) || strings.Contains(sx, "OPEN") {
							skip[s.name] = true
						}
					}
				}
				x.events(nil)
				y.events(nil)
				for i, s := range svcs {
					if kept[s.name] && !skip[s.name] {
						if gx, gy := x.state(s), y.state(s); gx != gy {
							t.Errorf("before the script, %s (variants %d → %d): reloaded %s, fresh %s", s.name, a[i], b[i], gx, gy)
						}
					}
				}
				for n, c := range post {
					time.Sleep(c.gap)
					gx, gy := rdPlayBoth(x, y, c)
					if ex, ey := x.events(skip), y.events(skip); !slices.Equal(ex, ey) {
						t.Errorf("call %d (%s): the events differ:\nreloaded %q\nfresh    %q", n, gx, ex, ey)
					}
					if skip[c.svc] {
						continue
					}
					if gx != gy {
						t.Errorf("call %d: reloaded %s, fresh %s\nA:\n%s\nB:\n%s", n, gx, gy, rdYAML(svcs, a), rdYAML(svcs, b))
					}
					for _, s := range svcs {
						if s.name == c.svc {
							if sx, sy := x.state(s), y.state(s); sx != sy {
								t.Errorf("after call %d: reloaded %s, fresh %s", n, sx, sy)
							}
						}
					}
				}
			})
		})
	}
}

func rdReload(t *testing.T, d *rdChain, yaml string) {
	t.Helper()
	cfg, err := grpcmw.ParseConfig([]byte(strings.ReplaceAll(yaml, "{DL}", d.dir)))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.reload(cfg); err != nil {
		t.Fatal(err)
	}
}
