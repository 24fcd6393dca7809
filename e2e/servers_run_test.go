package e2e

// The two servers of the server-side differential test (servers_test.go):
// one configuration, one script of concurrent arrivals, served by
// grpcmw.NewServer and by httpmw.NewServer, each inside its own
// testing/synctest bubble, and what each caller and the server saw
// recorded the same way.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/memnet"
)

// callHeader carries an arrival's index to the server.
const callHeader = "x-meshless-call"

// serverRun is what one server did with a script.
type serverRun struct {
	classes  []string // per call: what the caller got
	arrivals []int    // per call: the times it reached the server
	ran      []bool   // per call: its handler ran
	metrics  map[string]int64
	gauges   map[string]int64
	client   map[string]int64 // the meshless client's metric counts, when there is one
	state    string           // the bulkhead's limit and calls in flight at the end
}

// serverBackend is the handler the servers shed in front of: each call
// does what its arrival says.
type serverBackend struct {
	sc       serverScript
	mu       sync.Mutex
	arrivals []int
	ran      []bool
	handlers sync.WaitGroup
}

func newServerBackend(sc serverScript) *serverBackend {
	n := len(sc.arrivals)
	return &serverBackend{sc: sc, arrivals: make([]int, n), ran: make([]bool, n)}
}

// arrive counts call id's arrival at the server, outside its shedding.
func (b *serverBackend) arrive(id string) {
	i, err := strconv.Atoi(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil && i >= 0 && i < len(b.arrivals) {
		b.arrivals[i]++
	}
}

// serve runs call id's handler: it holds the call for its time (giving up
// when the call's context ends, unless it ignores it), then answers. It
// panics for a sPanic arrival.
func (b *serverBackend) serve(ctx context.Context, id string) sAnswer {
	b.handlers.Add(1)
	defer b.handlers.Done()
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(b.arrivals) {
		panic("no call " + id)
	}
	b.mu.Lock()
	b.ran[i] = true
	b.mu.Unlock()
	a := b.sc.arrivals[i]
	if a.answer == sIgnoresContext {
		time.Sleep(a.hold)
		return sOK
	}
	t := time.NewTimer(a.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return sEnded
	}
	if a.answer == sPanic {
		panic("the handler panicked")
	}
	return a.answer
}

// serverGRPC serves the script as grpc.testing.TestService/UnaryCall.
type serverGRPC struct {
	testgrpc.UnimplementedTestServiceServer
	b *serverBackend
}

func (g serverGRPC) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	switch g.b.serve(ctx, strings.Join(md.Get(callHeader), "")) {
	case sNotFound:
		return nil, status.Error(codes.NotFound, msgNotFound)
	case sFailure:
		return nil, status.Error(codes.Internal, "the handler failed")
	case sEnded:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &testgrpc.SimpleResponse{}, nil
}

// recoverUnary, outermost, turns a handler's panic into INTERNAL, as a
// recovery interceptor does: grpc-go itself does not recover.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return h(ctx, req)
}

// serverHTTP serves the script; net/http recovers a handler's panic itself
// (it aborts the connection).
func serverHTTP(b *serverBackend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch b.serve(r.Context(), r.Header.Get(callHeader)) {
		case sNotFound:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, msgNotFound)
		case sFailure:
			http.Error(w, "the handler failed", http.StatusInternalServerError)
		case sEnded:
			http.Error(w, r.Context().Err().Error(), 499)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
}

// playServer runs the script in a bubble: each arrival at its time, in its
// own goroutine, and the reload at its time. call makes call i under ctx.
func playServer(t *testing.T, b *serverBackend, reload func(), call func(ctx context.Context, i int) string) []string {
	t.Helper()
	sc := b.sc
	start := time.Now()
	classes := make([]string, len(sc.arrivals))
	var wg sync.WaitGroup
	reloaded := sc.reloadYML == ""
	for i, a := range sc.arrivals {
		if !reloaded && a.at > sc.reloadAt {
			time.Sleep(time.Until(start.Add(sc.reloadAt)))
			reload()
			reloaded = true
		}
		time.Sleep(time.Until(start.Add(a.at)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if a.deadline > 0 {
				var stop context.CancelFunc
				ctx, stop = context.WithTimeout(ctx, a.deadline)
				defer stop()
			}
			if a.cancel > 0 {
				defer time.AfterFunc(a.cancel, cancel).Stop()
			}
			classes[i] = call(ctx, i)
		}()
	}
	wg.Wait()
	b.handlers.Wait()
	// A handler whose caller had gone returns after its call did; the
	// middleware around it gives its permits back after it returns.
	synctest.Wait()
	return classes
}

// finish fills what the server and the client's recorder kept.
func (b *serverBackend) finish(t *testing.T, srv, cli *recorder, bh func() (*bulkhead.Bulkhead, bool), out *serverRun) {
	t.Helper()
	b.mu.Lock()
	out.arrivals, out.ran = b.arrivals, b.ran
	b.mu.Unlock()
	out.metrics = counts(t, srv.reader)
	out.gauges = gauges(t, srv.reader)
	if cli != nil {
		out.client = counts(t, cli.reader)
	}
	if h, ok := bh(); ok {
		out.state = fmt.Sprintf("limit %d, active %d", h.Limit(), h.Active())
	}
}

// playServerGRPC plays the script against grpcmw.NewServer, over gRPC on
// memnet, with a plain client or, with meshless set, a grpcmw client
// reading clientYML.
func playServerGRPC(t *testing.T, sc serverScript, meshless bool) (out serverRun) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		defer rec.close()
		b := newServerBackend(sc)
		cfg, err := grpcmw.ParseConfig([]byte(sc.yml))
		if err != nil {
			t.Fatal(err)
		}
		shed, err := grpcmw.NewServer(cfg, grpcmw.WithServerObserver(rec.obs))
		if err != nil {
			t.Fatal(err)
		}
		defer shed.Close()
		count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			b.arrive(strings.Join(md.Get(callHeader), ""))
			return h(ctx, req)
		}
		lis := memnet.Listen()
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(count, recoverUnary, shed.UnaryServerInterceptor()))
		testgrpc.RegisterTestServiceServer(srv, serverGRPC{b: b})
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(lis) }()
		defer func() { srv.Stop(); <-served }()
		dial := []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials())}
		var cli *recorder
		if meshless {
			cli = newRecorder(t)
			defer cli.close()
			ccfg, err := grpcmw.ParseConfig([]byte(clientYML))
			if err != nil {
				t.Fatal(err)
			}
			chain, err := grpcmw.New(ccfg, grpcmw.WithObserver(cli.obs))
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			dial = append(chain.DialOptions(), dial...)
		}
		conn, err := grpc.NewClient("passthrough:///mem", dial...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := testgrpc.NewTestServiceClient(conn)
		reload := func() {
			cfg, err := grpcmw.ParseConfig([]byte(sc.reloadYML))
			if err == nil {
				err = shed.Reload(cfg)
			}
			if err != nil {
				t.Errorf("gRPC reload: %v", err)
			}
		}
		out.classes = playServer(t, b, reload, func(ctx context.Context, i int) string {
			ctx = metadata.AppendToOutgoingContext(ctx, callHeader, strconv.Itoa(i))
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			if st, ok := status.FromError(err); ok && st.Code() == codes.Internal && strings.HasPrefix(st.Message(), "panic: ") {
				return "panicked"
			}
			return grpcClass(err)
		})
		b.finish(t, rec, cli, func() (*bulkhead.Bulkhead, bool) { return shed.Bulkhead(grpcService) }, &out)
	})
	return out
}

// playServerHTTP plays the script against httpmw.NewServer, over HTTP/1.1
// on memnet, one connection per request (so that net/http never sends a
// request again on a connection a panic closed), with a plain client or,
// with meshless set, an httpmw client reading clientYML.
func playServerHTTP(t *testing.T, sc serverScript, meshless bool) (out serverRun) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(t)
		defer rec.close()
		b := newServerBackend(sc)
		cfg, err := httpmw.ParseConfig([]byte(sc.yml))
		if err != nil {
			t.Fatal(err)
		}
		shed, err := httpmw.NewServer(cfg, httpmw.WithServerObserver(rec.obs))
		if err != nil {
			t.Fatal(err)
		}
		defer shed.Close()
		h := shed.Handler(serverHTTP(b))
		lis := memnet.Listen()
		srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.arrive(r.Header.Get(callHeader))
			h.ServeHTTP(w, r)
		})}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close(); <-served }()
		tr := &http.Transport{DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return lis.DialContext(ctx) }}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		var cli *recorder
		if meshless {
			cli = newRecorder(t)
			defer cli.close()
			ccfg, err := httpmw.ParseConfig([]byte(clientYML))
			if err != nil {
				t.Fatal(err)
			}
			chain, err := httpmw.New(ccfg, httpmw.WithObserver(cli.obs))
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			client = chain.Client(tr)
		}
		reload := func() {
			cfg, err := httpmw.ParseConfig([]byte(sc.reloadYML))
			if err == nil {
				err = shed.Reload(cfg)
			}
			if err != nil {
				t.Errorf("HTTP reload: %v", err)
			}
		}
		out.classes = playServer(t, b, reload, func(ctx context.Context, i int) string {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpHost+"/item/7", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(callHeader, strconv.Itoa(i))
			resp, err := client.Do(req)
			if err != nil && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				return "panicked" // net/http aborted the connection
			}
			return httpClass(resp, err)
		})
		b.finish(t, rec, cli, func() (*bulkhead.Bulkhead, bool) { return shed.Bulkhead(httpHost) }, &out)
	})
	return out
}

// gauges reads every gauge and up-down counter's value at the end, by
// metric and by the attributes that are not the transport's own.
func gauges(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrKey(p.Attributes.ToSlice())] += p.Value
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+attrKey(p.Attributes.ToSlice())] += int64(p.Value * 1000)
				}
			case metricdata.Sum[int64]:
				if d.IsMonotonic {
					continue
				}
				for _, p := range d.DataPoints {
					out[m.Name+attrKey(p.Attributes.ToSlice())] += p.Value
				}
			}
		}
	}
	return out
}
