package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/meshless/meshless/grpcmw/outlier"
	"github.com/meshless/meshless/internal/picknote"
)

// B8: the outlier balancer's picker (Pick, then the call's Done) against
// grpc-go's round_robin picker, both built over the same four READY
// endpoints by a fake ClientConn (no network: the picker alone).
func BenchmarkOutlierPick(b *testing.B) {
	untimed := outlier.Config{SlowCalls: outlier.SlowCalls{Disabled: true}}
	for _, tc := range []struct {
		name   string
		policy string
		cfg    any // an *outlier.Config, or the JSON of grpc-go's config
	}{
		{name: "round_robin", policy: "round_robin"},
		{name: "meshless_outlier", policy: outlier.Name, cfg: &outlier.Config{}},
		{name: "meshless_outlier_untimed", policy: outlier.Name, cfg: &untimed},
		// The real peer: grpc-go's own outlier detection (gRFC A50), with
		// both of its detectors on at their defaults, so that its Done
		// counts every call as meshless's does.
		{name: "grpc_outlier_detection", policy: "outlier_detection_experimental", cfg: grpcODDefaults},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, closeFn := readyPicker(b, tc.policy, tc.cfg, 4)
			defer closeFn()
			info := balancer.PickInfo{FullMethodName: "/bench.Service/Call", Ctx: context.Background()}
			b.ReportAllocs()
			for b.Loop() {
				res, err := p.Pick(info)
				if err != nil {
					b.Fatal(err)
				}
				if res.Done != nil {
					res.Done(balancer.DoneInfo{})
				}
			}
		})
	}
	// meshless's balancer on its defaults, as grpcmw's interceptor calls it:
	// each attempt's context is a note (package picknote; made per call, as
	// the interceptor makes it, so its share of a block's allocation is
	// counted here), the pick notes its endpoint there, and the call path
	// passes on the attempt's time, read at the attempt's edges for every
	// gate anyway: no clock read here. (gRPC puts two contexts of its own
	// above the note, each a step of the pick's lookup; not here, but in
	// BenchmarkOutlierPickPaired/noted_under_grpc_contexts.)
	b.Run("meshless_outlier_noted", func(b *testing.B) {
		p, closeFn := readyPicker(b, outlier.Name, &outlier.Config{}, 4)
		defer closeFn()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			note := picknote.New(ctx)
			res, err := p.Pick(balancer.PickInfo{FullMethodName: "/bench.Service/Call", Ctx: note})
			if err != nil {
				b.Fatal(err)
			}
			res.Done(balancer.DoneInfo{})
			note.Took(nil, time.Millisecond)
		}
	})
	// The floor of counting every call: round_robin's pick plus a Done that
	// does one atomic add.
	b.Run("round_robin+atomic_done", func(b *testing.B) {
		p, closeFn := readyPicker(b, "round_robin", nil, 4)
		defer closeFn()
		var n atomic.Int64
		done := func(balancer.DoneInfo) { n.Add(1) }
		info := balancer.PickInfo{FullMethodName: "/bench.Service/Call", Ctx: context.Background()}
		b.ReportAllocs()
		for b.Loop() {
			res, err := p.Pick(info)
			if err != nil {
				b.Fatal(err)
			}
			res.Done = done
			res.Done(balancer.DoneInfo{})
		}
	})
}

// grpcODDefaults is grpc-go's outlier_detection_experimental config with
// its success-rate and failure-percentage detectors on at their defaults
// (gRFC A50), over round_robin.
const grpcODDefaults = `{"successRateEjection":{},"failurePercentageEjection":{},"childPolicy":[{"round_robin":{}}]}`

// readyPicker builds policy over n endpoints, drives every SubConn to READY
// (and healthy), and returns the policy's last picker. cfg is nil, an
// *outlier.Config or a JSON string.
func readyPicker(tb testing.TB, policy string, cfg any, n int) (balancer.Picker, func()) {
	tb.Helper()
	cc := &fakeCC{updated: make(chan struct{}, 1)}
	bal := balancer.Get(policy).Build(cc, balancer.BuildOptions{})
	var lbCfg serviceconfig.LoadBalancingConfig
	if cfg != nil {
		js, ok := cfg.(string)
		if !ok {
			raw, err := json.Marshal(cfg)
			if err != nil {
				tb.Fatal(err)
			}
			js = string(raw)
		}
		parsed, err := balancer.Get(policy).(balancer.ConfigParser).ParseConfig(json.RawMessage(js))
		if err != nil {
			tb.Fatal(err)
		}
		lbCfg = parsed
	}
	var st resolver.State
	for i := range n {
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: fmt.Sprintf("10.0.0.%d:50051", i+1)}}})
	}
	ccs := balancer.ClientConnState{ResolverState: st}
	if lbCfg != nil {
		ccs.BalancerConfig = lbCfg
	}
	if err := bal.UpdateClientConnState(ccs); err != nil {
		tb.Fatal(err)
	}
	// Play gRPC: connect every SubConn the policy asked to, and report it
	// healthy once a health listener is registered. grpc-go's outlier
	// detection passes its child's updates on from a goroutine of its own,
	// so wait for each of its updates until the policy reports READY.
	deadline := time.After(10 * time.Second)
	for {
		for progress := true; progress; {
			progress = false
			cc.mu.Lock()
			scs := slices.Clone(cc.scs)
			cc.mu.Unlock()
			for _, sc := range scs {
				cc.mu.Lock()
				connect := sc.connect && !sc.ready
				health := sc.healthListener
				if health != nil && sc.healthy {
					health = nil
				}
				sc.ready = sc.ready || connect
				sc.healthy = sc.healthy || health != nil
				cc.mu.Unlock()
				if connect {
					progress = true
					sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
					sc.listener(balancer.SubConnState{ConnectivityState: connectivity.Ready})
				}
				if health != nil {
					progress = true
					health(balancer.SubConnState{ConnectivityState: connectivity.Ready})
				}
			}
		}
		cc.mu.Lock()
		ready := cc.state == connectivity.Ready && cc.picker != nil
		state := cc.state
		cc.mu.Unlock()
		if ready {
			break
		}
		select {
		case <-cc.updated:
		case <-deadline:
			tb.Fatalf("%s: state %v after every SubConn is READY", policy, state)
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.picker, bal.Close
}

// fakeCC is a balancer.ClientConn that makes fake SubConns and keeps the
// last picker.
type fakeCC struct {
	balancer.ClientConn
	mu      sync.Mutex
	scs     []*fakeSC
	picker  balancer.Picker
	state   connectivity.State
	updated chan struct{} // a token after every UpdateState and NewSubConn
}

func (c *fakeCC) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := &fakeSC{cc: c, listener: opts.StateListener}
	c.scs = append(c.scs, sc)
	c.notify()
	return sc, nil
}

func (c *fakeCC) UpdateState(s balancer.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.picker, c.state = s.Picker, s.ConnectivityState
	c.notify()
}

func (c *fakeCC) notify() {
	select {
	case c.updated <- struct{}{}:
	default:
	}
}

func (c *fakeCC) ResolveNow(resolver.ResolveNowOptions)   {}
func (c *fakeCC) Target() string                          { return "fake:///bench" }
func (c *fakeCC) MetricsRecorder() estats.MetricsRecorder { return noRecorder{} }

type fakeSC struct {
	balancer.SubConn
	cc             *fakeCC
	listener       func(balancer.SubConnState)
	connect        bool
	ready, healthy bool
	healthListener func(balancer.SubConnState)
}

func (s *fakeSC) Shutdown() {}

func (s *fakeSC) Connect() {
	s.cc.mu.Lock()
	defer s.cc.mu.Unlock()
	s.connect = true
	s.cc.notify()
}

func (s *fakeSC) RegisterHealthListener(l func(balancer.SubConnState)) {
	s.cc.mu.Lock()
	defer s.cc.mu.Unlock()
	s.healthListener, s.healthy = l, false
	s.cc.notify()
}

type noRecorder struct{ estats.MetricsRecorder }

func (noRecorder) RecordInt64Count(*estats.Int64CountHandle, int64, ...string)             {}
func (noRecorder) RecordFloat64Count(*estats.Float64CountHandle, float64, ...string)       {}
func (noRecorder) RecordInt64Histo(*estats.Int64HistoHandle, int64, ...string)             {}
func (noRecorder) RecordFloat64Histo(*estats.Float64HistoHandle, float64, ...string)       {}
func (noRecorder) RecordInt64Gauge(*estats.Int64GaugeHandle, int64, ...string)             {}
func (noRecorder) RecordInt64UpDownCount(*estats.Int64UpDownCountHandle, int64, ...string) {}
func (noRecorder) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}

// BenchmarkOutlierCallPaired is B8 on the call path: grpcmw's interceptor,
// on its defaults with outlierDetection, around an invoker that does with
// the balancer what gRPC does — a pick with the attempt's context, then the
// call's Done — on meshless's balancer over four READY endpoints, slow-call
// detection on. (a): the chain's slowCalls off, so its attempts carry no
// note and the picker times the call itself, reading the clock at the pick
// and at Done (how every call was timed before); (b): slowCalls on, so each
// attempt's context is a note (a sixteenth of an allocation), the pick notes its
// endpoint, and the engine passes on the attempt's time, which it reads for
// every gate anyway. diff-ns/call is (b) − (a): what the note saves a call.
func BenchmarkOutlierCallPaired(b *testing.B) {
	p, closeFn := readyPicker(b, outlier.Name, &outlier.Config{}, 4)
	defer closeFn()
	invoker := func(ctx context.Context, method string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		res, err := p.Pick(balancer.PickInfo{FullMethodName: method, Ctx: ctx})
		if err != nil {
			return err
		}
		res.Done(balancer.DoneInfo{})
		return nil
	}
	const method = "/grpc.testing.TestService/UnaryCall"
	ctx := context.Background()
	spans := chainOf(b, "outlierDetection: { slowCalls: { enabled: false } }").UnaryClientInterceptor()
	noted := chainOf(b, "outlierDetection: {}").UnaryClientInterceptor()
	benchHotPaired(b, func() { _ = spans(ctx, method, nil, nil, nil, invoker) },
		func() { _ = noted(ctx, method, nil, nil, nil, invoker) })
}

// BenchmarkOutlierPickPaired is B8' in pairs: grpc-go's outlier detection
// on its defaults (a) against meshless's balancer on its defaults (b),
// pick and Done over the same four READY endpoints, in alternating blocks
// (benchHotPaired). "noted" is a unary call through grpcmw's interceptor:
// its note made per call (a sixteenth of an allocation), the
// pick, Done, and the engine's time passed on; "noted_shared" a stream's
// attempt (noted_shared_alloc a retried stream's later one); "spans" a call of a client without the interceptor, timed by
// the picker with two reads of the monotonic clock.
func BenchmarkOutlierPickPaired(b *testing.B) {
	grpcOD, closeOD := readyPicker(b, "outlier_detection_experimental", grpcODDefaults, 4)
	defer closeOD()
	p, closeFn := readyPicker(b, outlier.Name, &outlier.Config{}, 4)
	defer closeFn()
	ctx := context.Background()
	pickDone := func(p balancer.Picker, ctx context.Context) {
		res, err := p.Pick(balancer.PickInfo{FullMethodName: "/bench.Service/Call", Ctx: ctx})
		if err != nil {
			b.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
	}
	peer := func() { pickDone(grpcOD, ctx) }
	b.Run("noted", func(b *testing.B) {
		benchHotPaired(b, peer, func() {
			note := picknote.New(ctx).For("/bench.Service/Call") // as grpcmw makes it
			pickDone(p, note)
			note.Took(nil, time.Millisecond)
		})
	})
	b.Run("spans", func(b *testing.B) {
		benchHotPaired(b, peer, func() { pickDone(p, ctx) })
	})
	// "noted, shared": a stream's attempt through the interceptor. Its pick
	// and end take a lock: they may run on different goroutines
	// (picknote.Shared). Its note lives in the stream's state, which the
	// stream allocates anyway (here a ring of them, each had once a lap);
	// "noted_shared_alloc" is a retried stream's later attempt, whose note
	// is an allocation of its own (picknote.NewShared).
	b.Run("noted_shared", func(b *testing.B) {
		ring := make([]picknote.Shared, 1024)
		i := 0
		benchHotPaired(b, peer, func() {
			note := ring[i%len(ring)].Init(ctx)
			i++
			pickDone(p, note)
			note.Took(nil, time.Millisecond)
		})
	})
	b.Run("noted_shared_alloc", func(b *testing.B) {
		benchHotPaired(b, peer, func() {
			note := picknote.NewShared(ctx)
			pickDone(p, note)
			note.Took(nil, time.Millisecond)
		})
	})
	// "noted, under gRPC's contexts": as gRPC picks, with two contexts of
	// its own made per call above the attempt's (the call's and the
	// attempt's RPC info), for both pickers alike: the note's lookup walks
	// them, grpc-go's picker does not look.
	type grpcKey struct{ i int }
	underGRPC := func(ctx context.Context) context.Context {
		return context.WithValue(context.WithValue(ctx, grpcKey{1}, 1), grpcKey{2}, 2)
	}
	b.Run("noted_under_grpc_contexts", func(b *testing.B) {
		benchHotPaired(b, func() { pickDone(grpcOD, underGRPC(ctx)) }, func() {
			note := picknote.New(ctx)
			pickDone(p, underGRPC(note))
			note.Took(nil, time.Millisecond)
		})
	})
}
