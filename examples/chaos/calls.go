// This file holds the clients, each with its own backend, and their count of
// calls.

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// client is one way of calling a backend: a column of the story.
type client struct {
	name     string
	about    string        // one line for the story's header
	backend  *backend      // its own, so that its load is its own
	deadline time.Duration // set on each call's context; 0: none
	conn     *grpc.ClientConn
	stub     testgrpc.TestServiceClient
	http     *http.Client // with -transport http, instead of conn and stub
	st       *stats
	series   *series // on the timeline, or nil
}

// newClients starts a backend for each client and connects the clients; obs
// receives the meshless chain's events.
func newClients(cfg config, obs resilience.Observer) (cs []*client, err error) {
	defer func() {
		if err != nil {
			closeClients(cs)
			cs = nil
		}
	}()
	if cfg.Transport == transportHTTP {
		return newHTTPClients(cfg, obs)
	}
	chain, err := grpcmw.New(cfg.Client, grpcmw.WithObserver(obs))
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name, about string
		deadline    time.Duration
		opts        []grpc.DialOption
	}{
		{"bare", fmt.Sprintf("a plain gRPC client, a %v deadline per call, nothing else", cfg.Timeout), cfg.Timeout, nil},
		{"meshless", "the same calls through a meshless chain (client.yaml below)", 0, chain.DialOptions()},
	} {
		b, err := startBackend(cfg.listen(), cfg.Capacity, transportGRPC)
		if err != nil {
			return cs, err
		}
		cl := &client{name: c.name, about: c.about, backend: b, deadline: c.deadline, st: newStats(len(cfg.Schedule))}
		cs = append(cs, cl)
		opts := append(append(c.opts, b.dialOpts...),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// Added after the chain's, so it runs once per attempt.
			grpc.WithChainUnaryInterceptor(countAttempts),
		)
		if c.opts != nil {
			opts = append(opts, grpc.WithDisableRetry()) // meshless retries; gRPC's own must not
		}
		if cl.conn, err = grpc.NewClient(b.target, opts...); err != nil {
			return cs, err
		}
		cl.conn.Connect()
		cl.stub = testgrpc.NewTestServiceClient(cl.conn)
	}
	return cs, nil
}

// newHTTPClients is newClients over HTTP: a plain net/http client with a
// deadline per call, and one whose transport httpmw wraps, each with its
// own backend.
func newHTTPClients(cfg config, obs resilience.Observer) (cs []*client, err error) {
	defer func() {
		if err != nil {
			closeClients(cs)
			cs = nil
		}
	}()
	var bs []*backend
	for _, c := range []struct {
		name, about string
		deadline    time.Duration
	}{
		{"bare", fmt.Sprintf("a plain net/http client, a %v deadline per call, nothing else", cfg.Timeout), cfg.Timeout},
		{"meshless", "the same requests through httpmw's RoundTripper (client.yaml below, with HTTP's status codes)", 0},
	} {
		b, err := startBackend(cfg.listen(), cfg.Capacity, transportHTTP)
		if err != nil {
			return cs, err
		}
		bs = append(bs, b)
		cs = append(cs, &client{name: c.name, about: c.about, backend: b, deadline: c.deadline, st: newStats(len(cfg.Schedule))})
	}
	hcs, err := httpClients(cfg, obs, bs)
	if err != nil {
		return cs, err
	}
	for i, hc := range hcs {
		cs[i].http = hc
	}
	return cs, nil
}

// closeClients closes the clients' connections, then stops their backends.
func closeClients(cs []*client) {
	for _, c := range cs {
		if c.conn != nil {
			c.conn.Close()
		}
		c.backend.stop()
	}
}

// attemptsKey is the context key of a call's count of requests sent.
type attemptsKey struct{}

// countAttempts counts each request that goes out to the backend: once per
// attempt, after every policy of the chain let it through.
func countAttempts(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// call makes one call and records it under phase p.
func (c *client) call(ctx context.Context, p int, req *testgrpc.SimpleRequest) {
	defer c.st.end()
	var sent atomic.Int32
	ctx = context.WithValue(ctx, attemptsKey{}, &sent)
	if c.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}
	start := time.Now()
	var err error
	if c.http != nil {
		path := pathFound
		if codes.Code(req.GetResponseStatus().GetCode()) == codes.NotFound {
			path = pathMissing
		}
		err = get(ctx, c.http, path)
	} else {
		_, err = c.stub.UnaryCall(ctx, req)
	}
	d := time.Since(start)
	c.st.record(p, d, int(sent.Load()), err)
	c.series.add(start, d, int(sent.Load()), err == nil || status.Code(err) == codes.NotFound)
}

// tally counts calls. Calls = OK + NotFound + Failed + Open + Throttled +
// Full once every call is over.
type tally struct {
	Calls    int // started
	Reached  int // requests the backend received: attempts, retries included
	OK       int
	NotFound int // the backend's business answer
	Failed   int // any other error from the backend, or its deadline
	Open     int // refused by the breaker (CIRCUIT_OPEN), nothing sent
	Full     int // refused by the bulkhead (BULKHEAD_FULL), nothing sent
	// Throttled is refused by the adaptive throttler (THROTTLED), nothing
	// sent.
	Throttled int
}

func (t *tally) add(u tally) {
	t.Calls += u.Calls
	t.Reached += u.Reached
	t.OK += u.OK
	t.NotFound += u.NotFound
	t.Failed += u.Failed
	t.Open += u.Open
	t.Full += u.Full
	t.Throttled += u.Throttled
}

// Rejected is the calls the client refused itself.
func (t tally) Rejected() int { return t.Open + t.Full + t.Throttled }

// Answered is the calls the backend answered as a healthy backend does.
func (t tally) Answered() int { return t.OK + t.NotFound }

// stats is one client's record of its calls, per phase of the schedule.
type stats struct {
	mu       sync.Mutex
	phases   []tally
	lat      [][]time.Duration // per phase, every call's latency
	interval tally             // since the last status line
	inflight int               // calls started and not over: their goroutines
	peak     int
}

func newStats(phases int) *stats {
	return &stats{phases: make([]tally, phases), lat: make([][]time.Duration, phases)}
}

// begin counts a call about to start in phase p.
func (s *stats) begin(p int) {
	s.mu.Lock()
	s.phases[p].Calls++
	s.interval.Calls++
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	s.mu.Unlock()
}

// record counts how a call started in phase p ended, after sent requests.
func (s *stats) record(p int, d time.Duration, sent int, err error) {
	t := tally{Reached: sent}
	switch {
	case err == nil:
		t.OK = 1
	case errors.Is(err, circuitbreaker.ErrOpen):
		t.Open = 1
	case errors.Is(err, bulkhead.ErrFull):
		t.Full = 1
	case errors.Is(err, throttler.ErrThrottled):
		t.Throttled = 1
	case status.Code(err) == codes.NotFound:
		t.NotFound = 1
	default:
		t.Failed = 1
	}
	s.mu.Lock()
	s.phases[p].add(t)
	s.interval.add(t)
	s.lat[p] = append(s.lat[p], d)
	s.mu.Unlock()
}

// end is the call's goroutine returning.
func (s *stats) end() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
}

// take returns the counts since the last take and the calls in flight now.
func (s *stats) take() (tally, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.interval
	s.interval = tally{}
	return t, s.inflight
}

// inFlight returns the calls in flight now.
func (s *stats) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}
