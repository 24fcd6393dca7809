package grpcmw_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
)

// The stream soak's configurations: the reloader alternates between them.
// StreamingOutputCall hedges; the other two retry (StreamingInputCall not
// in the second); every method's own level sets its timeouts, so that no
// stream outlives a hang at the server.
var streamSoakConfigs = [2]string{`
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { slidingWindowSize: 40, minimumNumberOfCalls: 20, failureRateThreshold: 90, waitDurationInOpenState: 30ms }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 4ms, retryableStatusCodes: [UNAVAILABLE, INTERNAL] }
  bulkhead: { maxConcurrentCalls: 5, maxWaitDuration: 20ms }
  rateLimiter: { limitForPeriod: 80, limitRefreshPeriod: 20ms, timeoutDuration: 5ms }
  adaptiveThrottling: { enabled: false }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall:
        retry: { enabled: false }
        hedging: { maxAttempts: 3, hedgingDelay: 3ms, nonFatalStatusCodes: [UNAVAILABLE, INTERNAL] }
        timeout: { overall: 200ms, perAttempt: 120ms }
      StreamingInputCall:
        timeout: { overall: 200ms }
      FullDuplexCall:
        timeout: { overall: 250ms, perAttempt: 100ms }
`, `
retryThrottling: { maxTokens: 100, tokenRatio: 1 }
defaults:
  circuitBreaker: { keyBy: method, slidingWindowSize: 30, minimumNumberOfCalls: 20, failureRateThreshold: 90, waitDurationInOpenState: 30ms }
  retry: { maxAttempts: 4, initialBackoff: 1ms, maxBackoff: 2ms, retryableStatusCodes: [UNAVAILABLE, INTERNAL] }
  bulkhead: { maxConcurrentCalls: 3, maxWaitDuration: 10ms }
  rateLimiter: { limitForPeriod: 60, limitRefreshPeriod: 20ms, timeoutDuration: 2ms }
  adaptiveThrottling: { window: 1s, multiplier: 3 }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall:
        retry: { enabled: false }
        hedging: { maxAttempts: 2, hedgingDelay: 8ms, nonFatalStatusCodes: [UNAVAILABLE, INTERNAL] }
        timeout: { overall: 150ms }
      StreamingInputCall:
        retry: { enabled: false }
        timeout: { overall: 150ms, perAttempt: 80ms }
      FullDuplexCall:
        timeout: { overall: 200ms }
`}

// streamSoakMaxAttempts is the most attempts (or copies) either
// configuration allows a call.
const streamSoakMaxAttempts = 4

const (
	soakIDHeader      = "soak-id"
	soakAttemptHeader = "soak-attempt"
	soakInnerPanic    = "soak: inner stream interceptor"
)

// soakCall is what a caller did and saw of one stream.
type soakCall struct {
	id    string
	kind  string // "out", "in", "bidi"
	sent  []string
	seen  int // the attempt whose response or header reached the caller, -1 if none
	final error

	mu      sync.Mutex // a bidi call's sending goroutine may find a problem too
	problem string     // the first invariant the caller saw broken
}

func (c *soakCall) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.problem == "" {
		c.problem = fmt.Sprintf(format, args...)
	}
}

// saw checks that a response (or header) of attempt prev is of the attempt
// the caller has seen so far, if any: a stream never mixes attempts.
func (c *soakCall) saw(prev int) {
	if c.seen >= 0 && c.seen != prev {
		c.fail("received from attempt %d after attempt %d", prev, c.seen)
	}
	c.seen = prev
}

func (c *soakCall) sawHeader(md metadata.MD) {
	if v := md.Get(soakAttemptHeader); len(v) > 0 {
		prev, _ := strconv.Atoi(v[0])
		c.saw(prev)
	}
}

// sawBody checks a streamed response: its attempt, and that it is the
// next one (none lost, none twice).
func (c *soakCall) sawBody(body []byte, want int) {
	prev, i, ok := strings.Cut(string(body), "/")
	p, _ := strconv.Atoi(prev)
	n, _ := strconv.Atoi(i)
	c.saw(p)
	if !ok || n != want {
		c.fail("response %q, want number %d", body, want)
	}
}

// TestStreamSoak opens, for a bounded time under -race, streams of the
// three kinds through a chain that retries (and hedges the server-streaming
// method) with a small bulkhead, a rate limiter and timeouts, to a server
// whose handlers fail before or after responding, panic, hang, answer
// trailers-only or send many responses; callers cancel at random, ask for
// the header or not, read to the end or abandon the stream, close their
// side early; the configuration is reloaded meanwhile. Then it checks that
// every bulkhead is back to zero in flight, that every call's error is a
// gRPC status, that no NOT_FOUND was retried, that no client-streaming or
// bidi call was replayed once a response or its header reached the caller,
// that each attempt got a prefix of what the caller sent, in order, and that
// only the panics the docs allow reached a caller (goleak, in TestMain,
// checks the goroutines).
func TestStreamSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	srvCfg, err := grpcmw.ParseConfig([]byte(`defaults: { bulkhead: { maxConcurrentCalls: 8 } }`))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := grpcmw.NewServer(srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shed.Close()
	backend := &soakServer{calls: make(map[string][]*soakArrival)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(recoverStream, shed.StreamServerInterceptor()))
	testgrpc.RegisterTestServiceServer(srv, backend)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cfg, err := grpcmw.ParseConfig([]byte(streamSoakConfigs[0]))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg, grpcmw.WithRetryBufferLimit(64)) // a few messages: some calls commit by size
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if rand.IntN(150) == 0 {
			panic(soakInnerPanic)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(chain.StreamClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)

	// Every bulkhead the chain used, reloads' replaced ones included.
	var (
		bhMu      sync.Mutex
		bulkheads []*bulkhead.Bulkhead
	)
	keepBulkheads := func() {
		bhMu.Lock()
		defer bhMu.Unlock()
		for _, key := range []string{testService, testService + "/StreamingOutputCall", testService + "/StreamingInputCall", testService + "/FullDuplexCall"} {
			if bh, ok := chain.Bulkhead(key); ok && !slices.Contains(bulkheads, bh) {
				bulkheads = append(bulkheads, bh)
			}
		}
	}

	var (
		ids     atomic.Int64
		panics  atomic.Int64
		callsMu sync.Mutex
		calls   []*soakCall
		bad     []string // panics the docs do not allow
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	one := func() {
		c := &soakCall{id: fmt.Sprint("s", ids.Add(1)), kind: []string{"out", "in", "bidi"}[rand.IntN(3)], seen: -1}
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), soakIDHeader, c.id), 5*time.Second)
		defer cancel()
		if rand.IntN(5) == 0 { // the caller gives up at a random moment
			tm := time.AfterFunc(time.Duration(rand.IntN(30))*time.Millisecond, cancel)
			defer tm.Stop()
		}
		defer func() {
			if r := recover(); r != nil {
				panics.Add(1)
				if r != soakInnerPanic {
					callsMu.Lock()
					bad = append(bad, fmt.Sprint(r))
					callsMu.Unlock()
				}
				return
			}
			callsMu.Lock()
			calls = append(calls, c)
			callsMu.Unlock()
		}()
		switch c.kind {
		case "out":
			c.final = soakServerStreaming(ctx, cancel, client, c)
		case "in":
			c.final = soakClientStreaming(ctx, cancel, client, c)
		default:
			c.final = soakBidi(ctx, cancel, client, c)
		}
	}
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 100000; i++ { // bounded; stop ends it sooner
				select {
				case <-stop:
					return
				default:
				}
				one()
			}
		})
	}
	for round := range 24 {
		time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond) // load runs meanwhile
		keepBulkheads()
		next, err := grpcmw.ParseConfig([]byte(streamSoakConfigs[(round+1)%2]))
		if err != nil {
			t.Fatal(err)
		}
		if err := chain.Reload(next); err != nil {
			t.Fatal(err)
		}
	}
	keepBulkheads()
	close(stop)
	wg.Wait()
	keepBulkheads()

	// Each call's own checks, and its final error.
	byCode := map[codes.Code]int{}
	for _, c := range calls {
		if c.problem != "" {
			t.Errorf("%s call %s: %s", c.kind, c.id, c.problem)
		}
		if c.final == nil {
			byCode[codes.OK]++
			continue
		}
		st, ok := status.FromError(c.final)
		if !ok {
			t.Errorf("%s call %s ended with %T %v, not a gRPC status", c.kind, c.id, c.final, c.final)
			continue
		}
		byCode[st.Code()]++
		if st.Code() == codes.Unknown {
			t.Errorf("%s call %s ended with %v: UNKNOWN, which nothing here answers", c.kind, c.id, c.final)
		}
	}
	for _, r := range bad {
		t.Errorf("a caller recovered %q: only the inner interceptor's panic may reach it", r)
	}
	// What the server saw of each call.
	backend.mu.Lock()
	retried := map[string]int{}
	for _, c := range calls {
		arrivals := backend.calls[c.id]
		if len(arrivals) > 1 {
			retried[c.kind]++
		}
		prevs := map[int]bool{}
		notFound := -1
		for _, a := range arrivals {
			if prevs[a.prev] || a.prev >= streamSoakMaxAttempts {
				t.Errorf("%s call %s: attempts %v: an attempt number twice, or past %d", c.kind, c.id, attemptsOf(arrivals), streamSoakMaxAttempts)
			}
			prevs[a.prev] = true
			if a.notFound && (notFound < 0 || a.prev < notFound) {
				notFound = a.prev
			}
		}
		if c.kind == "out" {
			continue // hedged: copies run side by side; one may start while a NOT_FOUND is on its way
		}
		for _, a := range arrivals {
			if notFound >= 0 && a.prev > notFound {
				t.Errorf("%s call %s: attempt %d after attempt %d answered NOT_FOUND", c.kind, c.id, a.prev, notFound)
			}
			if c.seen >= 0 && a.prev > c.seen {
				t.Errorf("%s call %s: replayed as attempt %d after attempt %d's response or header reached the caller", c.kind, c.id, a.prev, c.seen)
			}
			if len(a.got) > len(c.sent) || !slices.Equal(a.got, c.sent[:len(a.got)]) {
				t.Errorf("%s call %s: attempt %d read %q, not a prefix of what the caller sent, %q", c.kind, c.id, a.prev, a.got, c.sent)
			}
		}
	}
	backend.mu.Unlock()

	t.Logf("%d streams, %d inner panics recovered, final codes %v, calls with more than one attempt %v", len(calls), panics.Load(), byCode, retried)
	if len(calls) == 0 || panics.Load() == 0 || byCode[codes.OK] == 0 || byCode[codes.NotFound] == 0 {
		t.Errorf("the soak did not exercise what it claims: %d streams, %d panics, codes %v", len(calls), panics.Load(), byCode)
	}
	for _, bh := range bulkheads {
		waitUntil(t, func() bool { return bh.Active() == 0 })
	}
	for _, key := range []string{testService, grpcmw.OtherMethod} {
		if bh, ok := shed.Bulkhead(key); ok {
			waitUntil(t, func() bool { return bh.Active() == 0 })
		}
	}
}

func attemptsOf(arrivals []*soakArrival) []int {
	var prevs []int
	for _, a := range arrivals {
		prevs = append(prevs, a.prev)
	}
	return prevs
}

// soakStatus checks an error a stream's method returned that is not its
// final one (SendMsg's, Header's): io.EOF or a status.
func soakStatus(c *soakCall, what string, err error) {
	if _, ok := status.FromError(err); !ok && err != io.EOF {
		c.fail("%s returned %T %v, not a gRPC status", what, err, err)
	}
}

// soakDrain reads a stream to its end and returns its final error (nil
// for io.EOF); then it reads the stream's trailer and context, as callers
// do.
func soakDrain(c *soakCall, st grpc.ClientStream, recv func() ([]byte, error), n *int) error {
	for {
		body, err := recv()
		if err != nil {
			_, _ = st.Trailer(), st.Context().Err()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		c.sawBody(body, *n)
		*n++
	}
}

func soakServerStreaming(ctx context.Context, cancel context.CancelFunc, client testgrpc.TestServiceClient, c *soakCall) (final error) {
	var trailer metadata.MD
	st, err := client.StreamingOutputCall(ctx, sendParams(1+rand.IntN(6)), grpc.Trailer(&trailer))
	if err != nil {
		return err
	}
	n := 0
	defer func() {
		// Only an attempt that ended OK at once answers OK without a
		// response: the caller gets its trailer.
		if final == nil && n == 0 && trailer.Get("soak-trailer") == nil {
			c.fail("ended OK without a response, with trailer %v: not the answering attempt's", trailer)
		}
	}()
	if rand.IntN(3) == 0 {
		md, err := st.Header()
		soakStatus(c, "Header", err)
		c.sawHeader(md)
	}
	recv := func() ([]byte, error) {
		m, err := st.Recv()
		return m.GetPayload().GetBody(), err
	}
	if rand.IntN(3) == 0 { // read part, then abandon the stream
		for range rand.IntN(4) {
			body, err := recv()
			if err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			c.sawBody(body, n)
			n++
		}
		cancel()
	}
	return soakDrain(c, st, recv, &n)
}

func soakClientStreaming(ctx context.Context, cancel context.CancelFunc, client testgrpc.TestServiceClient, c *soakCall) error {
	st, err := client.StreamingInputCall(ctx)
	if err != nil {
		return err
	}
	for i := range rand.IntN(8) {
		body := fmt.Sprintf("c%d", i)
		c.sent = append(c.sent, body)
		if err := st.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: []byte(body)}}); err != nil {
			soakStatus(c, "Send", err)
			break
		}
	}
	switch rand.IntN(4) {
	case 0:
		cancel() // abandon it
	case 1:
		soakStatus(c, "CloseSend", st.CloseSend())
		md, err := st.Header()
		soakStatus(c, "Header", err)
		c.sawHeader(md)
	}
	resp, err := st.CloseAndRecv()
	if err == nil {
		c.saw(int(resp.GetAggregatedPayloadSize()))
	}
	return err
}

func soakBidi(ctx context.Context, cancel context.CancelFunc, client testgrpc.TestServiceClient, c *soakCall) error {
	st, err := client.FullDuplexCall(ctx)
	if err != nil {
		return err
	}
	if rand.IntN(4) == 0 {
		md, err := st.Header()
		soakStatus(c, "Header", err)
		c.sawHeader(md)
	}
	recv := func() ([]byte, error) {
		m, err := st.Recv()
		return m.GetPayload().GetBody(), err
	}
	send := func(i int) error {
		body := fmt.Sprintf("b%d", i)
		c.sent = append(c.sent, body)
		err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(body)}})
		soakStatus(c, "Send", err)
		return err
	}
	n, msgs := 0, rand.IntN(8)
	switch rand.IntN(4) {
	case 3: // send in a goroutine of its own while this one receives
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for i := range msgs {
				if send(i) != nil {
					return
				}
			}
			soakStatus(c, "CloseSend", st.CloseSend())
		}()
		err := soakDrain(c, st, recv, &n)
		<-sent
		return err
	case 0: // ping-pong
		for i := range msgs {
			if send(i) != nil {
				break
			}
			body, err := recv()
			if err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			c.sawBody(body, n)
			n++
		}
	case 1: // all at once, or fewer: the sending side closed early
		for i := range msgs {
			if send(i) != nil {
				break
			}
		}
	default: // some, one response, then abandon it
		for i := range msgs {
			if send(i) != nil {
				break
			}
		}
		if body, err := recv(); err == nil {
			c.sawBody(body, n)
			n++
		}
		cancel()
	}
	soakStatus(c, "CloseSend", st.CloseSend())
	err = soakDrain(c, st, recv, &n)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
