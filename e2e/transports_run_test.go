package e2e

// The two clients of the differential test (transports_test.go): one
// configuration, one script, played through grpcmw and through httpmw,
// each inside its own testing/synctest bubble so that both see the same
// time, and what each caller and the backend saw recorded the same way.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/memnet"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// The names each transport's breaker goes by.
const (
	grpcService = "grpc.testing.TestService"
	httpHost    = "backend.test"
)

// run is what one transport did with a script.
type run struct {
	classes     []string  // per call: what the caller saw, in transport-neutral words
	attempts    []int     // per call: the attempts the backend saw
	tokens      []float64 // per call: the retry throttle's tokens after it
	outcomes    []string  // per call: the breaker's outcomes of its attempts
	transitions []string  // the breaker's transitions, each with its time since the start
	metrics     map[string]int64
	state       string // the breaker's state at the end
	resends     int    // HTTP: net/http's own resends of aborted attempts (backend.resent)
}

// playFunc plays steps through one transport with the configuration yml.
type playFunc func(t *testing.T, yml string, steps []step) run

// recorder is what both transports observe with: the events in order (for
// the transitions) and OpenTelemetry's metrics (for the counts).
type recorder struct {
	events *transitions
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	otel   *otelmw.Observer
	obs    resilience.Observer
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{events: &transitions{}, reader: sdkmetric.NewManualReader()}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	o, err := otelmw.New(r.mp)
	if err != nil {
		t.Fatal(err)
	}
	r.otel = o
	r.obs = resilience.Observers(r.events, o)
	return r
}

func (r *recorder) close() {
	_ = r.otel.Close()
	_ = r.mp.Shutdown(context.Background())
}

// play runs the script: before each call its gap of the bubble's time, then
// synctest.Wait so that a timer due by then (the breaker's open wait) has
// fired, never racing the call.
func play(t *testing.T, name string, b *backend, rec *recorder, steps []step, throttle *retry.Throttle, call func(context.Context) string, out *run) {
	t.Helper()
	start := time.Now()
	for i, s := range steps {
		time.Sleep(s.gap) // the script's idle time, on the bubble's clock
		synctest.Wait()
		b.begin(i)
		ctx, cancel := s.context()
		c := call(ctx)
		cancel()
		out.classes = append(out.classes, c)
		out.attempts = append(out.attempts, b.attempts(i))
		out.tokens = append(out.tokens, throttle.Tokens())
		out.outcomes = append(out.outcomes, rec.events.take())
		if testing.Verbose() && len(steps) < 50 {
			t.Logf("%s %8v call %d %v: %s after %d attempts, breaker %s", name, time.Since(start), i, s, c, b.attempts(i), out.outcomes[i])
		}
	}
}

// finish reads what the recorder kept: the transitions (times since start)
// and the metric counts.
func (r *recorder) finish(t *testing.T, start time.Time, out *run) {
	t.Helper()
	r.events.mu.Lock()
	defer r.events.mu.Unlock()
	for _, e := range r.events.got {
		out.transitions = append(out.transitions, fmt.Sprintf("%v %v→%v", e.at.Sub(start), e.From, e.To))
	}
	out.metrics = counts(t, r.reader)
}

// transitions keeps the breakers' transitions with the bubble's time of
// each.
type transitions struct {
	mu  sync.Mutex
	got []timedEvent
	// calls are the breaker's outcomes since the last take, in order.
	calls []string
}

// take returns the breaker's outcomes since the last take.
func (o *transitions) take() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := strings.Join(o.calls, " ")
	o.calls = nil
	return out
}

type timedEvent struct {
	resilience.Event
	at time.Time
}

func (o *transitions) Attach(src resilience.Source) resilience.Recorder {
	if src.Kind != resilience.KindCircuitBreaker {
		return nil
	}
	return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
		o.mu.Lock()
		defer o.mu.Unlock()
		switch e.Type {
		case resilience.EventTransition:
			o.got = append(o.got, timedEvent{e, time.Now()})
		case resilience.EventCall:
			c := e.Outcome.String()
			if e.Slow {
				c += "(slow)"
			}
			o.calls = append(o.calls, c)
		case resilience.EventRejection:
			o.calls = append(o.calls, "rejected")
		}
	})
}

// playGRPC plays the script through grpcmw, over gRPC on memnet.
func playGRPC(t *testing.T, yml string, steps []step) run {
	return playGRPCWith(t, setup{yml: yml}, steps)
}

// setup is what a play is given beside its script.
type setup struct {
	yml string // the client's configuration
	// serverYML, when set, is the configuration of the server's own load
	// shedding (grpcmw.NewServer, httpmw.NewServer) in front of the
	// backend.
	serverYML string
	method    string // HTTP's request method: GET when empty
}

// playGRPCWith is playGRPC with a setup.
func playGRPCWith(t *testing.T, su setup, steps []step) (out run) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rec := newRecorder(t)
		defer rec.close()
		b := newBackend(steps)
		lis := memnet.Listen()
		opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(b.countUnary)}
		if su.serverYML != "" {
			cfg, err := grpcmw.ParseConfig([]byte(su.serverYML))
			if err != nil {
				t.Fatal(err)
			}
			shed, err := grpcmw.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, shed.ServerOptions()...)
		}
		srv := grpc.NewServer(opts...)
		testgrpc.RegisterTestServiceServer(srv, grpcBackend{b: b})
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(b.trackConns(lis)) }()
		defer func() { srv.Stop(); <-served }()
		cfg, err := grpcmw.ParseConfig([]byte(su.yml))
		if err != nil {
			t.Fatal(err)
		}
		chain, err := grpcmw.New(cfg, grpcmw.WithObserver(rec.obs))
		if err != nil {
			t.Fatal(err)
		}
		defer chain.Close()
		conn, err := grpc.NewClient("passthrough:///mem", append(chain.DialOptions(), grpc.WithChainUnaryInterceptor(resetAfterDeadline),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := testgrpc.NewTestServiceClient(conn)
		play(t, "gRPC", b, rec, steps, chain.Throttle(), func(ctx context.Context) string {
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return grpcClass(err)
		}, &out)
		b.handlers.Wait()
		rec.finish(t, start, &out)
		if cb, ok := chain.Breaker(grpcService); ok {
			out.state = cb.State().String()
		}
	})
	return out
}

// resetAfterDeadline, below meshless, holds back a DEADLINE_EXCEEDED that
// grpc-go returns at the very instant of its context's deadline, before the
// context reports done, until it does. grpc-go's server resets a stream
// when the deadline it was sent (grpc-timeout) passes, and its client reads
// that reset as DEADLINE_EXCEEDED once the deadline is due; in a bubble,
// with no network latency, the server's deadline is the caller's very
// instant, so the reset may come before the caller's own timer has ended
// its context, and the retry policy, which stops for a done context, would
// take a retry token or not as the scheduler picks. Over a real network the
// server's timer starts a latency later, and its reset comes after.
func resetAfterDeadline(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			<-ctx.Done() // due now: the caller's timer fires at this instant
		}
	}
	return err
}

// grpcClass names what a gRPC caller got.
func grpcClass(err error) string {
	if err == nil {
		return "ok"
	}
	if _, ok := resilience.AsRejection(err); ok {
		return "rejected:" + grpcmw.RejectionReason(err)
	}
	if r := grpcmw.RejectionReason(err); r != "" {
		return "relayed:" + r
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound, codes.InvalidArgument, codes.Unimplemented:
		return business(st.Code().String(), st.Message())
	case codes.ResourceExhausted:
		return "pushback:RESOURCE_EXHAUSTED"
	case codes.Canceled:
		return "cancelled"
	case codes.Unavailable, codes.Internal, codes.DeadlineExceeded, codes.Unknown, codes.DataLoss:
		return "failure:" + strings.ToUpper(codeName(st.Code()))
	}
	return "unexpected:" + err.Error()
}

func codeName(c codes.Code) string {
	switch c {
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.DataLoss:
		return "DATA_LOSS"
	}
	return c.String()
}

// business names a business answer, checking that its message reached the
// caller unchanged.
func business(code, msg string) string {
	want := map[string]string{"NotFound": msgNotFound, "InvalidArgument": msgInvalid, "Unimplemented": msgUnimplemented,
		"NOT_FOUND": msgNotFound, "INVALID_ARGUMENT": msgInvalid, "UNIMPLEMENTED": msgUnimplemented}[code]
	name := map[string]string{"NotFound": "NOT_FOUND", "InvalidArgument": "INVALID_ARGUMENT", "Unimplemented": "UNIMPLEMENTED"}[code]
	if name == "" {
		name = code
	}
	if msg != want {
		return fmt.Sprintf("business:%s with %q, not the backend's %q", name, msg, want)
	}
	return "business:" + name
}

// playHTTP plays the script through httpmw, over HTTP/1.1 on memnet, as
// GET requests.
func playHTTP(t *testing.T, yml string, steps []step) run {
	return playHTTPWith(t, setup{yml: yml}, steps)
}

// playHTTPWith is playHTTP with a setup.
func playHTTPWith(t *testing.T, su setup, steps []step) (out run) {
	method := su.method
	if method == "" {
		method = http.MethodGet
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rec := newRecorder(t)
		defer rec.close()
		b := newBackend(steps)
		lis := memnet.Listen()
		var h http.Handler = httpBackend(b)
		if su.serverYML != "" {
			cfg, err := httpmw.ParseConfig([]byte(su.serverYML))
			if err != nil {
				t.Fatal(err)
			}
			shed, err := httpmw.NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer shed.Close()
			h = shed.Handler(h)
		}
		srv := &http.Server{Handler: b.countHTTP(h)}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close(); <-served }()
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
		defer tr.CloseIdleConnections()
		cfg, err := httpmw.ParseConfig([]byte(su.yml))
		if err != nil {
			t.Fatal(err)
		}
		chain, err := httpmw.New(cfg, httpmw.WithObserver(rec.obs))
		if err != nil {
			t.Fatal(err)
		}
		defer chain.Close()
		client := chain.Client(&stamp{rt: tr})
		play(t, "HTTP", b, rec, steps, chain.Throttle(), func(ctx context.Context) string {
			req, err := http.NewRequestWithContext(ctx, method, "http://"+httpHost+"/item/7", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			return httpClass(resp, err)
		}, &out)
		b.handlers.Wait()
		rec.finish(t, start, &out)
		out.resends = b.resends
		if cb, ok := chain.Breaker(httpHost); ok {
			out.state = cb.State().String()
		}
	})
	return out
}

// stamp, below the chain, gives each attempt an attemptHeader of its own,
// so that the backend tells net/http's own resend of a request (see
// httpBackend) from an attempt of meshless's.
type stamp struct {
	rt http.RoundTripper
	n  atomic.Int64
}

const attemptHeader = "X-Test-Attempt"

func (s *stamp) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(attemptHeader, strconv.FormatInt(s.n.Add(1), 10))
	return s.rt.RoundTrip(r)
}

// httpClass names what an HTTP caller got, in gRPC's words, and closes the
// response.
func httpClass(resp *http.Response, err error) string {
	if err != nil {
		if r := httpmw.RejectionReason(err); r != "" {
			return "rejected:" + r
		}
		if errors.Is(err, context.Canceled) {
			return "cancelled"
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "failure:UNAVAILABLE" // a broken connection, in gRPC's words
		}
		var te interface{ Timeout() bool }
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) && te.Timeout() {
			return "failure:DEADLINE_EXCEEDED"
		}
		return "unexpected:" + err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil && errors.Is(err, io.ErrUnexpectedEOF) {
		switch resp.StatusCode { // the status came, its body broke
		case http.StatusServiceUnavailable:
			return "failure:UNAVAILABLE"
		case http.StatusOK:
			return "ok, its body cut short"
		}
	}
	if err != nil {
		return "unexpected: reading the body: " + err.Error()
	}
	if r := resp.Header.Get(httpmw.ReasonHeader); r != "" {
		return "relayed:" + r
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return "ok"
	case http.StatusNotFound:
		return business("NOT_FOUND", string(body))
	case http.StatusBadRequest:
		return business("INVALID_ARGUMENT", string(body))
	case http.StatusNotImplemented:
		return business("UNIMPLEMENTED", string(body))
	case http.StatusTooManyRequests:
		return "pushback:RESOURCE_EXHAUSTED"
	case 499: // nginx's Client Closed Request, gRPC's CANCELLED (docs/configuration.md, hosts)
		return "cancelled"
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return "failure:UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "failure:DEADLINE_EXCEEDED"
	case http.StatusInternalServerError:
		// One status for gRPC's three: the body, which must reach the
		// caller unchanged, tells them apart.
		switch string(body) {
		case msgUnknown:
			return "failure:UNKNOWN"
		case msgDataLoss:
			return "failure:DATA_LOSS"
		}
		return "failure:INTERNAL"
	}
	return fmt.Sprintf("unexpected: status %d", resp.StatusCode)
}

// transportAttrs are the attributes that name a transport's call or
// instance (a service or a host, a method or a route): dropped, so that
// the two transports' counts can be compared.
var transportAttrs = map[attribute.Key]bool{
	"meshless.circuit_breaker.name": true, "meshless.bulkhead.name": true, "rpc.method": true,
	"rpc.service": true, "rpc.system": true, "rpc.system.name": true, "rpc.grpc.status_code": true, "server.address": true,
	"server.port": true, "url.template": true, "http.request.method": true,
	"http.response.status_code": true, "error.type": true, "meshless.timeout.name": true,
	"meshless.rate_limiter.name": true,
}

// counts reads every counter and histogram's count, by metric and by the
// attributes that are not the transport's own ("metric{k=v,…}" → count).
// Gauges are left out: they are read at the end, by state.
func counts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			if !transportAttrs[a.Key] {
				kv = append(kv, string(a.Key)+"="+a.Value.Emit())
			}
		}
		sort.Strings(kv)
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] += int64(p.Count)
				}
			case metricdata.Sum[int64]:
				if !d.IsMonotonic {
					continue // an up-down counter: a level, not a count
				}
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] += p.Value
				}
			}
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}
