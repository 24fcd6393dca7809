// This file holds the pods scenario: one bad pod among four real backends
// (gRPC servers on loopback TCP), which both clients reach through a manual
// resolver that lists all four. The bare client balances with plain
// round_robin; the meshless client with the meshless_outlier balancer that
// pods.yaml's outlierDetection section installs, which ejects the bad pod.

package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// podsYAML configures the pods scenario's meshless client.
//
//go:embed pods.yaml
var podsYAML string

// podMode is how a pod answers.
type podMode int32

const (
	podHealthy podMode = iota // answers after its work
	podFailing                // answers UNAVAILABLE at once
	podSlow                   // answers, after slow rather than work
)

// podPhase is one step of the pods scenario: the pod Bad (an index; -1 for
// none) answers as Mode, the others stay healthy.
type podPhase struct {
	Name     string
	Bad      int
	Mode     podMode
	Duration time.Duration
}

// podsConfig is one run of the pods scenario.
type podsConfig struct {
	Phases     []podPhase
	Pods       int           // how many
	Rate       int           // calls per second, per client
	Work       time.Duration // a healthy pod's time per call
	Slow       time.Duration // the slow pod's
	Timeout    time.Duration // the bare client's deadline per call
	Client     *grpcmw.Config
	ClientYAML string
	Observer   resilience.Observer
	Quiet      bool
	Net        podNetwork // nil: loopback TCP
	Timeline   *track     // nil: none
}

func defaultPodsConfig() (podsConfig, error) {
	client, err := grpcmw.ParseConfig([]byte(podsYAML))
	if err != nil {
		return podsConfig{}, fmt.Errorf("pods.yaml: %w", err)
	}
	return podsConfig{
		Phases: []podPhase{
			{"healthy", -1, podHealthy, 2 * time.Second},
			{"one-failing", 0, podFailing, 5 * time.Second},
			{"one-slow", 1, podSlow, 5 * time.Second},
		},
		Pods:       4,
		Rate:       200,
		Work:       2 * time.Millisecond,
		Slow:       250 * time.Millisecond,
		Timeout:    500 * time.Millisecond,
		Client:     client,
		ClientYAML: podsYAML,
	}, nil
}

// schedule is the phases as a schedule, for its arithmetic.
func (c podsConfig) schedule() schedule {
	s := make(schedule, len(c.Phases))
	for i, p := range c.Phases {
		s[i] = phase{Name: p.Name, Duration: p.Duration}
	}
	return s
}

func (c podsConfig) validate() error {
	var errs []error
	if c.Pods < 2 || c.Pods > 64 {
		errs = append(errs, fmt.Errorf("pods must be in [2, 64], got %d", c.Pods))
	}
	if c.Rate < 1 || c.Rate > 100_000 {
		errs = append(errs, fmt.Errorf("rate must be in [1, 100000] calls per second, got %d", c.Rate))
	}
	if c.Work <= 0 || c.Slow <= 0 || c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("work, slow and timeout must be positive, got %v, %v, %v", c.Work, c.Slow, c.Timeout))
	}
	for _, p := range c.Phases {
		if p.Duration < 0 {
			errs = append(errs, fmt.Errorf("the %s phase must not be negative, got %v", p.Name, p.Duration))
		}
		if p.Bad >= c.Pods {
			errs = append(errs, fmt.Errorf("the %s phase's bad pod %d is not one of %d", p.Name, p.Bad, c.Pods))
		}
	}
	if c.schedule().total() <= 0 {
		errs = append(errs, errors.New("the pods phases must last some time"))
	}
	if c.Client == nil || c.Client.OutlierDetection == nil {
		errs = append(errs, errors.New("the pods client needs an outlierDetection section"))
	} else if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// podNetwork is where pods listen and how clients reach them by address.
type podNetwork interface {
	listen(i int) (lis net.Listener, addr string, err error)
	dialOptions() []grpc.DialOption
}

// tcpPods listens on free loopback ports: what the program does.
type tcpPods struct{}

func (tcpPods) listen(int) (net.Listener, string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return lis, lis.Addr().String(), nil
}

func (tcpPods) dialOptions() []grpc.DialOption { return nil }

// The metadata by which a pod knows who called it, in which phase.
const (
	mdClient = "chaos-client"
	mdPhase  = "chaos-phase"
	mdPod    = "chaos-pod" // in the trailer: the index of the pod that answered
)

// pod is one backend of the pods scenario.
type pod struct {
	testgrpc.UnimplementedTestServiceServer
	name, addr string
	index      int
	work, slow time.Duration
	modes      []podMode        // by phase: how it answers the calls of that phase
	received   [][]atomic.Int64 // by client, by phase: requests received
	srv        *grpc.Server
}

// UnaryCall counts the request under the client and phase its metadata
// names (values out of range are not counted) and answers as the pod does
// in that phase: a call started in one phase is answered as that phase
// says, even if it arrives in the next.
func (p *pod) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	grpc.SetTrailer(ctx, metadata.Pairs(mdPod, strconv.Itoa(p.index))) //nolint:errcheck // best effort: the count is the pod's own
	md, _ := metadata.FromIncomingContext(ctx)
	mode := podHealthy
	if ph := mdIndex(md, mdPhase); ph >= 0 && ph < len(p.modes) {
		mode = p.modes[ph]
		if c := mdIndex(md, mdClient); c >= 0 && c < len(p.received) {
			p.received[c][ph].Add(1)
		}
	}
	d := p.work
	switch mode {
	case podFailing:
		return nil, status.Error(codes.Unavailable, msgDown)
	case podSlow:
		d = p.slow
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if codes.Code(req.GetResponseStatus().GetCode()) == codes.NotFound {
		return nil, status.Error(codes.NotFound, msgNotFound)
	}
	return &testgrpc.SimpleResponse{}, nil
}

// mdIndex reads a small non-negative integer from md; -1 if absent or not one.
func mdIndex(md metadata.MD, key string) int {
	v := md.Get(key)
	if len(v) != 1 || len(v[0]) > 4 {
		return -1
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// podCall is one call of a pods client, as it ended.
type podCall struct {
	At    time.Duration // when it started, since the scenario's start
	Phase int
	Pod   int // the pod that answered, -1 if none did
	Lat   time.Duration
	OK    bool // OK or NOT_FOUND
}

// podClient is one client of the pods scenario.
type podClient struct {
	name     string
	index    int // in metadata, and in the pods' counts
	deadline time.Duration
	conn     *grpc.ClientConn
	stub     testgrpc.TestServiceClient
	pods     int     // how many
	series   *series // on the timeline, or nil
	mu       sync.Mutex
	calls    []podCall // as many as the schedule starts: bounded by it
	inflight int
}

func (c *podClient) call(ctx context.Context, start time.Time, ph int, req *testgrpc.SimpleRequest) {
	ctx = metadata.AppendToOutgoingContext(ctx, mdClient, strconv.Itoa(c.index), mdPhase, strconv.Itoa(ph))
	if c.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}
	var tr metadata.MD
	t0 := time.Now()
	_, err := c.stub.UnaryCall(ctx, req, grpc.Trailer(&tr))
	lat := time.Since(t0)
	ok := err == nil || status.Code(err) == codes.NotFound
	idx := mdIndex(tr, mdPod)
	if idx >= c.pods {
		idx = -1
	}
	c.series.add(t0, lat, 1, ok)
	c.mu.Lock()
	c.calls = append(c.calls, podCall{At: t0.Sub(start), Phase: ph, Pod: idx, Lat: lat, OK: ok})
	c.inflight--
	c.mu.Unlock()
}

// ejection is an outlier balancer's ejection or return of a pod.
type ejection struct {
	At       time.Duration // since the scenario's start
	Pod      int           // index, -1 if unknown
	Addr     string
	Returned bool
	Reason   string
}

// ejectionsTo is an observer that sends the outlier balancer's ejections and
// returns to ch, stamped with the time since start; it drops them should ch
// be full, and never blocks the balancer.
func ejectionsTo(ch chan<- ejection, start time.Time, pods map[string]int) resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindOutlier {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type != resilience.EventEjected && e.Type != resilience.EventReturned {
				return
			}
			ej := ejection{At: time.Since(start), Pod: -1, Addr: e.Endpoint, Returned: e.Type == resilience.EventReturned}
			if i, ok := pods[e.Endpoint]; ok {
				ej.Pod = i
			}
			if e.Reason != nil {
				ej.Reason = e.Reason.String()
			}
			select {
			case ch <- ej:
			default:
			}
		})
	})
}

var podsScheme atomic.Int64

// runPods plays the pods scenario, tells it on w (unless cfg.Quiet), prints
// its summary on w and returns it, once every call has ended and the pods
// have stopped; early if ctx ends.
func runPods(ctx context.Context, cfg podsConfig, w io.Writer) (podsSummary, error) {
	if err := cfg.validate(); err != nil {
		return podsSummary{}, err
	}
	if cfg.Net == nil {
		cfg.Net = tcpPods{}
	}
	sched := cfg.schedule()
	start := time.Now()
	cfg.Timeline.begin(start)

	var pods []*pod
	defer func() {
		for _, p := range pods {
			p.srv.Stop()
		}
	}()
	index := map[string]int{}
	var addrs []resolver.Address
	for i := range cfg.Pods {
		lis, addr, err := cfg.Net.listen(i)
		if err != nil {
			return podsSummary{}, err
		}
		p := &pod{name: fmt.Sprintf("pod-%d", i+1), addr: addr, index: i, work: cfg.Work, slow: cfg.Slow, srv: grpc.NewServer()}
		for _, ph := range cfg.Phases {
			m := podHealthy
			if ph.Bad == i {
				m = ph.Mode
			}
			p.modes = append(p.modes, m)
		}
		p.received = make([][]atomic.Int64, 2)
		for c := range p.received {
			p.received[c] = make([]atomic.Int64, len(sched))
		}
		testgrpc.RegisterTestServiceServer(p.srv, p)
		go p.srv.Serve(lis) //nolint:errcheck // Serve returns once Stop is called
		pods = append(pods, p)
		index[addr] = i
		addrs = append(addrs, resolver.Address{Addr: addr})
	}

	events := make(chan ejection, 256)
	chain, err := grpcmw.New(cfg.Client, grpcmw.WithObserver(resilience.Observers(cfg.Observer, ejectionsTo(events, start, index))))
	if err != nil {
		return podsSummary{}, err
	}
	defer chain.Close()
	var clients []*podClient
	defer func() {
		for _, c := range clients {
			c.conn.Close()
		}
	}()
	for i, name := range []string{"bare", "meshless"} {
		r := manual.NewBuilderWithScheme(fmt.Sprintf("chaospods%d", podsScheme.Add(1)))
		r.InitialState(resolver.State{Addresses: addrs})
		opts := append(cfg.Net.dialOptions(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithResolvers(r))
		c := &podClient{name: name, index: i, pods: cfg.Pods, series: cfg.Timeline.series(name)}
		if name == "bare" {
			c.deadline = cfg.Timeout
			opts = append(opts, grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`))
		} else {
			opts = append(chain.DialOptions(), opts...)
		}
		if c.conn, err = grpc.NewClient(r.Scheme()+":///pods", opts...); err != nil {
			return podsSummary{}, err
		}
		c.conn.Connect()
		c.stub = testgrpc.NewTestServiceClient(c.conn)
		clients = append(clients, c)
	}

	tw := w
	if cfg.Quiet {
		tw = io.Discard
	}
	s := &podsStory{w: tw, cfg: cfg, pods: pods, clients: clients, chain: chain}
	s.header()

	var wg sync.WaitGroup
	tick := time.NewTicker(max(time.Second/time.Duration(cfg.Rate), time.Millisecond))
	defer tick.Stop()
	cur, started, startedBefore := -1, int64(0), int64(0)
	nextStatus := time.Second
	var ejections []ejection
	for {
		el := time.Since(start)
		p := sched.at(el)
		if ctx.Err() != nil {
			p = len(sched)
		}
		if cur >= 0 && (p != cur || el >= nextStatus) {
			s.status(el, cfg.Phases[cur].Name)
			for nextStatus <= el {
				nextStatus += time.Second
			}
		}
		if p == len(sched) {
			break
		}
		if p != cur {
			cur, startedBefore = p, started
			s.phase(el, p)
		}
		due := startedBefore + int64((el-sched.start(p)).Seconds()*float64(cfg.Rate))
		for ; started < due; started++ {
			req := request(started)
			for _, c := range clients {
				c.mu.Lock()
				c.inflight++
				c.mu.Unlock()
				wg.Go(func() { c.call(ctx, start, p, req) })
			}
		}
		select {
		case <-ctx.Done():
		case e := <-events:
			ejections = append(ejections, s.ejection(e))
		case <-tick.C:
		}
	}
	wg.Wait()
	for drained := false; !drained; {
		select {
		case e := <-events:
			ejections = append(ejections, s.ejection(e))
		default:
			drained = true
		}
	}
	sum := summarizePods(cfg, pods, clients, ejections, time.Since(start))
	sum.Interrupted = ctx.Err() != nil
	sum.print(w)
	return sum, nil
}
