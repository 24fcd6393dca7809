// This file holds the cluster scenario: three client pods, each its own
// grpcmw chain built from cluster.yaml with its own gRPC connection, call
// one dead dependency (a gRPC server answering UNAVAILABLE) at a few calls a
// second each. They do it twice: alone (no cluster section: each pod's
// breaker decides on its own calls), then in cluster mode (the pods share
// their windows and opens through Redis: an embedded miniredis, or a real
// one with -redis). The dependency counts the requests each pod sent it.

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

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// clusterYAML configures the cluster scenario's pods.
//
//go:embed cluster.yaml
var clusterYAML string

// The cluster scenario's two runs, in order.
const (
	modeAlone = iota
	modeCluster
)

var clusterRuns = []string{"alone", "cluster"}

// clusterConfig is one play of the cluster scenario.
type clusterConfig struct {
	Run        time.Duration // each run's length
	Rates      []int         // calls per second of each pod (A, B, C)
	Client     *grpcmw.Config
	ClientYAML string
	RedisAddr  string // a real Redis (-redis); "" for an embedded miniredis
	Observer   resilience.Observer
	Cluster    cluster.Listener // hears the pods' clusters too (the metrics); nil for none
	Quiet      bool
	Net        podNetwork // where the dependency listens; nil: loopback TCP
	Timeline   *track     // nil: none
	// inProcess serves the embedded miniredis on in-memory pipes rather than
	// loopback TCP: what the tests do, inside a synctest bubble.
	inProcess bool
}

func defaultClusterConfig() (clusterConfig, error) {
	client, err := grpcmw.ParseConfig([]byte(clusterYAML))
	if err != nil {
		return clusterConfig{}, fmt.Errorf("cluster.yaml: %w", err)
	}
	return clusterConfig{Run: 5 * time.Second, Rates: []int{3, 1, 1}, Client: client, ClientYAML: clusterYAML}, nil
}

func (c clusterConfig) validate() error {
	var errs []error
	if c.Run <= 0 {
		errs = append(errs, fmt.Errorf("each cluster run must last some time, got %v", c.Run))
	}
	if len(c.Rates) < 2 || len(c.Rates) > 26 {
		errs = append(errs, fmt.Errorf("the cluster scenario needs 2 to 26 pods, got %d", len(c.Rates)))
	}
	for _, r := range c.Rates {
		if r < 1 || r > 1000 {
			errs = append(errs, fmt.Errorf("a cluster pod's rate must be in [1, 1000] calls per second, got %d", r))
		}
	}
	if c.Client == nil || c.Client.Cluster == nil {
		errs = append(errs, errors.New("the cluster scenario's client needs a cluster section"))
	} else if err := c.Client.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// syncInterval is the cluster section's, or cluster mode's default.
func (c clusterConfig) syncInterval() time.Duration {
	if s := c.Client.Cluster.SyncInterval; s != nil {
		return s.D()
	}
	return cluster.DefaultConfig().SyncInterval
}

// minimumCalls is the breaker's minimumNumberOfCalls as cluster.yaml sets it.
func (c clusterConfig) minimumCalls() int {
	if cb := c.Client.Defaults.CircuitBreaker; cb != nil && cb.MinimumNumberOfCalls != nil {
		return *cb.MinimumNumberOfCalls
	}
	return circuitbreaker.DefaultConfig().MinimumNumberOfCalls
}

// clusterRedis is the Redis of the cluster run and the client the pods
// share.
type clusterRedis struct {
	rdb   *redis.Client
	about string // for the story
	mini  *miniredis.Miniredis
}

// openRedis starts the embedded miniredis, or reaches the real Redis.
func (c clusterConfig) openRedis(ctx context.Context) (*clusterRedis, error) {
	// The cluster's exchanges are bounded by half the sync interval: the
	// client gives up then too (docs/cluster.md).
	t := min(c.syncInterval()/2, time.Second)
	o := &redis.Options{
		DialTimeout: t, ReadTimeout: t, WriteTimeout: t, ContextTimeoutEnabled: true,
		// No CLIENT SETINFO, and no maintenance notifications, whose
		// negotiation resolves the server's name (no DNS inside the tests'
		// synctest bubble): neither is of use to the demo.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	r := &clusterRedis{}
	switch {
	case c.RedisAddr != "":
		o.Addr = c.RedisAddr
		r.about = "the Redis at " + c.RedisAddr + " (-redis)"
	case c.inProcess:
		r.mini = miniredis.NewMiniRedis()
		o.Dialer = func(context.Context, string, string) (net.Conn, error) { return r.mini.Dial() }
		r.about = "an embedded miniredis, on in-memory pipes"
	default:
		r.mini = miniredis.NewMiniRedis()
		if err := r.mini.Start(); err != nil {
			return nil, fmt.Errorf("starting the embedded Redis: %w", err)
		}
		o.Addr = r.mini.Addr()
		r.about = "an embedded miniredis at " + o.Addr + " (a real Redis with -redis ADDR)"
	}
	if r.mini != nil {
		r.mini.ClockTTL(true) // keys expire with the clock, as in Redis
	}
	r.rdb = redis.NewClient(o)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.rdb.Ping(pctx).Err(); err != nil {
		r.close()
		return nil, fmt.Errorf("cluster scenario: no answer from %s: %w", r.about, err)
	}
	return r, nil
}

func (r *clusterRedis) close() {
	_ = r.rdb.Close()
	if r.mini != nil {
		r.mini.Close()
	}
}

// The outcomes of a cluster pod's call.
const (
	outReached  = iota // the dependency answered (UNAVAILABLE)
	outRejected        // CIRCUIT_OPEN, at once
	outOK              // cannot happen: the dependency is dead
	outOther
	nOutcomes
)

// clusterPod is one client pod in one run.
type clusterPod struct {
	name  string
	index int
	rate  int
	chain *grpcmw.Chain
	conn  *grpc.ClientConn
	stub  testgrpc.TestServiceClient
	// timeline counts the calls that reached the dependency; nil: none
	timeline *track
	// outcomes counts the pod's calls by outcome; firstRejected dates its
	// first CIRCUIT_OPEN rejection.
	outcomes      [nOutcomes]atomic.Int64
	firstRejected atomic.Int64 // ns since the run's start, +1; 0: none yet
}

func podName(i int) string { return string(rune('A' + i)) }

func (p *clusterPod) call(ctx context.Context, start time.Time, run int) {
	ctx = metadata.AppendToOutgoingContext(ctx, mdClient, strconv.Itoa(p.index), mdPhase, strconv.Itoa(run))
	t0 := time.Now()
	_, err := p.stub.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	switch {
	case err == nil:
		p.outcomes[outOK].Add(1)
	case grpcmw.RejectionReason(err) == grpcmw.ReasonCircuitOpen:
		p.outcomes[outRejected].Add(1)
		p.firstRejected.CompareAndSwap(0, int64(time.Since(start))+1)
	case status.Code(err) == codes.Unavailable:
		p.outcomes[outReached].Add(1)
		p.timeline.tally(clusterRuns[run], t0.Sub(start))
	default:
		p.outcomes[outOther].Add(1)
	}
}

// breakerEvent is a pod's breaker opening (by itself, or because another
// pod's open reached it through Redis).
type breakerEvent struct {
	At     time.Duration // since the run's start
	Pod    int
	Remote bool
}

// events collects a run's breaker events.
type events struct {
	start time.Time
	mu    sync.Mutex
	list  []breakerEvent // bounded: one per transition of a breaker that waits 10s
}

func (e *events) add(pod int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, breakerEvent{At: time.Since(e.start), Pod: pod})
}

// remote marks pod's last open as another pod's: the cluster tells of a
// remote open once the breaker has opened (and told its observer).
func (e *events) remote(pod int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.list) - 1; i >= 0; i-- {
		if e.list[i].Pod == pod {
			e.list[i].Remote = true
			return
		}
	}
}

// opensOf is an observer that records pod's breaker opens.
func (e *events) opensOf(pod int) resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindCircuitBreaker {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			if ev.Type == resilience.EventTransition && ev.To == circuitbreaker.StateOpen {
				e.add(pod)
			}
		})
	})
}

// podListener tells one pod's remote opens to the run's events, and
// everything to the shared listener (the metrics).
type podListener struct {
	pod    int
	events *events
	next   cluster.Listener
}

func (l podListener) Synced(ok bool) {
	if l.next != nil {
		l.next.Synced(ok)
	}
}

func (l podListener) Connected(up bool) {
	if l.next != nil {
		l.next.Connected(up)
	}
}

func (l podListener) RemoteOpen(name string) {
	l.events.remote(l.pod)
	if l.next != nil {
		l.next.RemoteOpen(name)
	}
}

var clusterRunID atomic.Int64

// runCluster plays both runs, tells them on w (unless cfg.Quiet), prints the
// summary on w and returns it; early if ctx ends.
func runCluster(ctx context.Context, cfg clusterConfig, w io.Writer) (clusterSummary, error) {
	if err := cfg.validate(); err != nil {
		return clusterSummary{}, err
	}
	if cfg.Net == nil {
		cfg.Net = tcpPods{}
	}
	rd, err := cfg.openRedis(ctx)
	if err != nil {
		return clusterSummary{}, err
	}
	defer rd.close()

	// The dead dependency: one server, which counts each pod's requests in
	// each run.
	lis, addr, err := cfg.Net.listen(0)
	if err != nil {
		return clusterSummary{}, err
	}
	dep := &pod{name: "dependency", addr: addr, srv: grpc.NewServer(), modes: []podMode{podFailing, podFailing}}
	dep.received = make([][]atomic.Int64, len(cfg.Rates))
	for i := range dep.received {
		dep.received[i] = make([]atomic.Int64, len(clusterRuns))
	}
	testgrpc.RegisterTestServiceServer(dep.srv, dep)
	go dep.srv.Serve(lis) //nolint:errcheck // Serve returns once Stop is called
	defer dep.srv.Stop()

	tw := w
	if cfg.Quiet {
		tw = io.Discard
	}
	s := &clusterStory{w: tw, cfg: cfg}
	s.header(rd.about, addr)
	sum := clusterSummary{Pods: len(cfg.Rates), MinimumCalls: cfg.minimumCalls(), SyncInterval: cfg.syncInterval(), Redis: rd.about}
	for run := range clusterRuns {
		if ctx.Err() != nil {
			break
		}
		r, err := playRun(ctx, cfg, run, rd.rdb, addr, dep, s)
		if err != nil {
			return sum, err
		}
		if ctx.Err() != nil && r.Pods == nil {
			break // interrupted before its calls began
		}
		sum.Runs = append(sum.Runs, r)
	}
	sum.Interrupted = ctx.Err() != nil
	sum.print(w)
	return sum, nil
}

// playRun plays one run: the pods' chains, started a third of a sync
// interval apart (as pods that started at different moments sync at
// different moments), then their calls for cfg.Run.
func playRun(ctx context.Context, cfg clusterConfig, run int, rdb redis.UniversalClient, addr string, dep *pod, s *clusterStory) (clusterResult, error) {
	client := *cfg.Client
	if run == modeAlone {
		client.Cluster = nil
	} else {
		cs := *client.Cluster
		ns := "meshless-chaos"
		if cs.Namespace != nil {
			ns = *cs.Namespace
		}
		// A namespace of its own: a real Redis may hold a previous run's
		// open, still in force.
		ns = fmt.Sprintf("%s-%d-%d", ns, time.Now().UnixNano(), clusterRunID.Add(1))
		cs.Namespace = &ns
		client.Cluster = &cs
	}
	ev := &events{}
	var pods []*clusterPod
	defer func() {
		for _, p := range pods {
			p.conn.Close()
			p.chain.Close()
		}
	}()
	stagger := cfg.syncInterval() / time.Duration(len(cfg.Rates))
	for i, rate := range cfg.Rates {
		if i > 0 && run == modeCluster {
			if sleep(ctx, stagger) != nil {
				return clusterResult{}, nil // interrupted: no run
			}
		}
		opts := []grpcmw.Option{grpcmw.WithObserver(resilience.Observers(cfg.Observer, ev.opensOf(i)))}
		if run == modeCluster {
			opts = append(opts, grpcmw.WithRedisClient(rdb), grpcmw.WithClusterListener(podListener{pod: i, events: ev, next: cfg.Cluster}))
		}
		chain, err := grpcmw.New(&client, opts...)
		if err != nil {
			return clusterResult{}, err
		}
		dial := append(chain.DialOptions(), cfg.Net.dialOptions()...)
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
		conn, err := grpc.NewClient("passthrough:///"+addr, dial...)
		if err != nil {
			chain.Close()
			return clusterResult{}, err
		}
		pods = append(pods, &clusterPod{name: podName(i), index: i, rate: rate, chain: chain, conn: conn, stub: testgrpc.NewTestServiceClient(conn), timeline: cfg.Timeline})
	}

	start := time.Now()
	ev.mu.Lock()
	ev.start = start
	ev.list = ev.list[:0]
	ev.mu.Unlock()
	s.run(run)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() { paced(ctx, start, cfg.Run, p, run, &wg) })
	}
	s.watch(ctx, start, cfg.Run, pods, ev)
	wg.Wait()

	r := clusterResult{Name: clusterRuns[run], Start: start}
	ev.mu.Lock()
	r.Events = append(r.Events, ev.list...)
	ev.mu.Unlock()
	for i, p := range pods {
		pr := clusterPodResult{Name: p.name, Rate: p.rate, Reached: int(dep.received[i][run].Load())}
		pr.Failed, pr.Rejected = int(p.outcomes[outReached].Load()), int(p.outcomes[outRejected].Load())
		pr.OK, pr.Other = int(p.outcomes[outOK].Load()), int(p.outcomes[outOther].Load())
		if f := p.firstRejected.Load(); f > 0 {
			pr.FirstRejected = time.Duration(f - 1)
		} else {
			pr.FirstRejected = -1
		}
		r.Pods = append(r.Pods, pr)
	}
	r.Elapsed = time.Since(start)
	s.done(r)
	return r, nil
}

// paced makes p's calls at its rate, each in its own goroutine (on wg), in
// the middle of each of its intervals, for d from start.
func paced(ctx context.Context, start time.Time, d time.Duration, p *clusterPod, run int, wg *sync.WaitGroup) {
	every := time.Second / time.Duration(p.rate)
	for k := 0; ; k++ {
		at := time.Duration(k)*every + every/2
		if at >= d {
			return
		}
		if err := sleep(ctx, time.Until(start.Add(at))); err != nil {
			return
		}
		wg.Go(func() { p.call(ctx, start, run) })
	}
}

// sleep waits for d, or for ctx to end (its error then).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
