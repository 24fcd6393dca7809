package e2e

// The scripted backend of the differential test (transports_test.go): one
// script of answers, served over gRPC and over HTTP, each on an in-memory
// network (internal/memnet) so that a testing/synctest bubble's clock runs
// while the client waits.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
)

// answer is what the backend does with one attempt.
type answer uint8

const (
	aOK              answer = iota
	aNotFound               // NOT_FOUND / 404: a business answer
	aInvalid                // INVALID_ARGUMENT / 400: a business answer
	aUnavailable            // UNAVAILABLE / 503
	aInternal               // INTERNAL / 500
	aHang                   // no answer before the caller's deadline
	aPushback               // RESOURCE_EXHAUSTED with grpc-retry-pushback-ms / 429 with Retry-After
	aRelayedOpen            // a downstream meshless's CIRCUIT_OPEN, passed on unchanged
	aRelayedFull            // a downstream meshless's BULKHEAD_FULL, passed on unchanged
	aRelayedLimit           // a downstream meshless's RATE_LIMITED, passed on unchanged
	aPushbackLong           // aPushback asking for a wait past the call's deadline
	aUnavailableWait        // UNAVAILABLE with grpc-retry-pushback-ms / 503 with Retry-After
	aSlow                   // OK, after slowAnswer: a slow call for the breaker
	aBadGateway             // UNAVAILABLE / 502: a gateway that could not reach its upstream
	aGatewayTimeout         // DEADLINE_EXCEEDED sent by the server / 504: its upstream timed out
	aUnknown                // UNKNOWN / 500
	aDataLoss               // DATA_LOSS / 500
	aExhausted              // RESOURCE_EXHAUSTED without pushback / 429 without Retry-After
	aLate                   // OK, just after the per-attempt timeout fired
	aAbort                  // the server drops the connection / the handler panics: a transport error
	aCut                    // UNAVAILABLE's header, then the connection drops / 503 whose body breaks midway
	aUnimplemented          // UNIMPLEMENTED / 501: a business answer, though a 5xx
	aPushbackNow            // aPushback asking for no wait: grpc-retry-pushback-ms 0 / Retry-After 0
	aCancelled              // CANCELLED sent by the server / 499: the backend's own caller gave up
	// The answers below differ by design, and are not drawn at random
	// (TestAResponseIsOneCallAsLongAsItsHeaderOverHTTPOnly).
	aLateBody // the header at once, the reply (the body) past the per-attempt timeout
	aOKCut    // OK's header, then the connection drops / a 200 whose body breaks midway
	nAnswers
)

var answerNames = [nAnswers]string{"ok", "not_found", "invalid", "unavailable", "internal", "hang", "pushback",
	"relayed_open", "relayed_full", "relayed_limit", "pushback_long", "unavailable_wait", "slow", "bad_gateway",
	"gateway_timeout", "unknown", "data_loss", "exhausted", "late", "abort", "cut", "unimplemented", "pushback_now", "cancelled", "late_body",
	"ok_cut"}

// slowAnswer is how long an aSlow answer takes: past the breaker's
// slowCallDurationThreshold, within the per-attempt timeout (diffYAML),
// and off the tenths of a second every other wait of the scripts is made
// of, so that it never ends at the very instant a timeout does (a hedge
// sent at 300ms answering at 1s would tie with the first copy's timeout:
// either order is right, and the two transports need not pick the same).
const slowAnswer = 730 * time.Millisecond

// lateAnswer is how long an aLate answer takes: a millisecond past the
// per-attempt timeout (diffYAML), so that the answer is on its way when
// the timeout has fired.
const lateAnswer = time.Second + time.Millisecond

// retryable reports whether the configuration (diffYAML) retries a.
func (a answer) retryable() bool {
	switch a {
	case aUnavailable, aHang, aPushback, aPushbackLong, aUnavailableWait, aBadGateway, aGatewayTimeout, aExhausted,
		aLate, aAbort, aCut, aPushbackNow:
		return true
	}
	return false
}

// class is what the caller gets when the call ends with a.
func (a answer) class() string {
	return [nAnswers]string{"ok", "business:NOT_FOUND", "business:INVALID_ARGUMENT", "failure:UNAVAILABLE",
		"failure:INTERNAL", "failure:DEADLINE_EXCEEDED", "pushback:RESOURCE_EXHAUSTED", "relayed:CIRCUIT_OPEN",
		"relayed:BULKHEAD_FULL", "relayed:RATE_LIMITED", "pushback:RESOURCE_EXHAUSTED", "failure:UNAVAILABLE", "ok",
		"failure:UNAVAILABLE", "failure:DEADLINE_EXCEEDED", "failure:UNKNOWN", "failure:DATA_LOSS",
		"pushback:RESOURCE_EXHAUSTED", "failure:DEADLINE_EXCEEDED", "failure:UNAVAILABLE", "failure:UNAVAILABLE",
		"business:UNIMPLEMENTED", "pushback:RESOURCE_EXHAUSTED", "cancelled", "", ""}[a]
}

func (a answer) String() string { return answerNames[a] }

// The waits an aPushback (and aUnavailableWait) and an aPushbackLong
// answer ask for: whole seconds, as Retry-After writes them. The long one is
// past the overall timeout (diffYAML).
const (
	pushbackSeconds     = 1
	pushbackLongSeconds = 5
)

// The messages of the business answers, which must reach the caller
// unchanged.
const (
	msgNotFound      = "no such item"
	msgInvalid       = "bad item id"
	msgUnimplemented = "no such verb here"
)

// The messages of the answers HTTP writes as a 500 and gRPC as UNKNOWN or
// DATA_LOSS: an HTTP caller tells them apart by the body only.
const (
	msgUnknown  = "backend bug of an unknown kind"
	msgDataLoss = "backend lost the item"
)

// wait is the pushback a asks for, in seconds.
func (a answer) wait() int {
	switch a {
	case aPushbackLong:
		return pushbackLongSeconds
	case aPushbackNow:
		return 0
	}
	return pushbackSeconds
}

// step is one logical call of a script.
type step struct {
	// gap is the script's idle time before the call: the bubble's clock
	// moves on by it (the breaker's open wait runs out during gaps).
	gap time.Duration
	// deadline, when not 0, is the caller's own deadline for the call;
	// cancel, when not 0, is when the caller gives up (cancels its
	// context). Below 0, the context has ended before the call begins.
	deadline, cancel time.Duration
	// answers are the backend's answers to the call's first, second, …
	// attempt; the last one repeats.
	answers []answer
}

func (s step) String() string {
	out := fmt.Sprintf("gap %v, answers %v", s.gap, s.answers)
	if s.deadline != 0 {
		out += fmt.Sprintf(", deadline %v", s.deadline)
	}
	if s.cancel != 0 {
		out += fmt.Sprintf(", cancelled at %v", s.cancel)
	}
	return out
}

// context is the caller's context for the call, and its cancel.
func (s step) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if s.deadline != 0 {
		ctx, cancel = context.WithTimeout(ctx, s.deadline)
	}
	if s.cancel < 0 {
		ctx, cancel = context.WithCancel(ctx)
		cancel()
	}
	if s.cancel > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		t := time.AfterFunc(s.cancel, stop)
		prev := cancel
		cancel = func() { t.Stop(); stop(); prev() }
	}
	return ctx, cancel
}

// backend plays a script: Begin(i) makes step i the current call; each
// attempt that reaches the backend takes the current call's next answer
// and is counted.
type backend struct {
	mu    sync.Mutex
	steps []step
	cur   int
	seen  []int // attempts served by the handler, per call
	// arrived counts the attempts that reached the server, per call: those
	// served and those a shedding server answered itself.
	arrived []int
	// handlers counts the handlers running: the servers' Stop and Close
	// do not wait for them, the bubble must.
	handlers sync.WaitGroup
	// conns are the connections the gRPC server accepted (aAbort drops
	// them).
	conns []net.Conn
	// aborted are the HTTP attempts (attemptHeader) the handler aborted;
	// resends counts net/http's own resends of them.
	aborted map[string]bool
	resends int
}

// resent reports whether the HTTP request r is net/http's own resend of an
// attempt the handler aborted, and counts it if so. http.Transport sends an
// idempotent request again, once, on a new connection, when the reused
// connection it went on closes before any byte of a response; the attempt
// is meshless's one attempt still (one outcome, no retry token, no backoff).
// gRPC does no such thing for a call the server received. So the resend is
// not counted as an attempt, takes no answer of the script, and is aborted
// as the attempt it repeats: both transports' callers see one broken
// attempt.
func (b *backend) resent(r *http.Request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id := r.Header.Get(attemptHeader); b.aborted[id] {
		b.resends++
		return true
	}
	return false
}

// abort records that the handler aborts the HTTP attempt r.
func (b *backend) abort(r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted == nil {
		b.aborted = map[string]bool{}
	}
	b.aborted[r.Header.Get(attemptHeader)] = true
}

// trackConns is lis, keeping the connections it accepts in b.
func (b *backend) trackConns(lis net.Listener) net.Listener { return tracking{lis, b} }

type tracking struct {
	net.Listener
	b *backend
}

func (l tracking) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.b.mu.Lock()
		l.b.conns = append(l.b.conns, c)
		l.b.mu.Unlock()
	}
	return c, err
}

// drop closes every connection the gRPC server accepted, as a server that
// crashed mid-call does: the caller gets UNAVAILABLE, the status gRPC
// gives a broken connection.
func (b *backend) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

func newBackend(steps []step) *backend {
	return &backend{steps: steps, seen: make([]int, len(steps)), arrived: make([]int, len(steps))}
}

func (b *backend) begin(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = i
}

func (b *backend) next() answer {
	b.mu.Lock()
	defer b.mu.Unlock()
	as := b.steps[b.cur].answers
	n := b.seen[b.cur]
	b.seen[b.cur]++
	return as[min(n, len(as)-1)]
}

func (b *backend) attempts(i int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived[i]
}

func (b *backend) arrive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.arrived[b.cur]++
}

// countUnary counts the attempts that reach the gRPC server, outside any
// shedding.
func (b *backend) countUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	b.arrive()
	return h(ctx, req)
}

// countHTTP counts the requests that reach the HTTP server, outside any
// shedding.
func (b *backend) countHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.resent(r) {
			panic(http.ErrAbortHandler)
		}
		b.arrive()
		next.ServeHTTP(w, r)
	})
}

// hang waits for the end of the attempt, then a millisecond more: the
// caller's own deadline, not the answer the server would send at that same
// instant, ends the attempt, on both transports (gRPC's server context
// carries the caller's deadline; HTTP's does not).
func hang(ctx context.Context) {
	<-ctx.Done()
	time.Sleep(time.Millisecond) // the bubble's clock: the answer comes after the deadline
}

// grpcBackend serves the script as grpc.testing.TestService/UnaryCall.
type grpcBackend struct {
	testgrpc.UnimplementedTestServiceServer
	b *backend
}

func (g grpcBackend) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	g.b.handlers.Add(1)
	defer g.b.handlers.Done()
	switch a := g.b.next(); a {
	case aOK:
		return &testgrpc.SimpleResponse{}, nil
	case aSlow:
		time.Sleep(slowAnswer) // the bubble's clock: a slow backend
		return &testgrpc.SimpleResponse{}, nil
	case aLate:
		time.Sleep(lateAnswer) // the bubble's clock: past the attempt's timeout
		return &testgrpc.SimpleResponse{}, nil
	case aNotFound:
		return nil, status.Error(codes.NotFound, msgNotFound)
	case aInvalid:
		return nil, status.Error(codes.InvalidArgument, msgInvalid)
	case aUnimplemented:
		return nil, status.Error(codes.Unimplemented, msgUnimplemented)
	case aCancelled:
		return nil, status.Error(codes.Canceled, "gave up upstream")
	case aUnavailable:
		return nil, status.Error(codes.Unavailable, "backend down")
	case aInternal:
		return nil, status.Error(codes.Internal, "backend bug")
	case aBadGateway:
		return nil, status.Error(codes.Unavailable, "bad gateway")
	case aGatewayTimeout:
		return nil, status.Error(codes.DeadlineExceeded, "upstream timed out")
	case aUnknown:
		return nil, status.Error(codes.Unknown, msgUnknown)
	case aDataLoss:
		return nil, status.Error(codes.DataLoss, msgDataLoss)
	case aExhausted:
		return nil, status.Error(codes.ResourceExhausted, "quota exceeded")
	case aHang:
		hang(ctx)
		return nil, status.FromContextError(ctx.Err()).Err()
	case aPushback, aPushbackLong, aPushbackNow:
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcmw.PushbackTrailer, strconv.Itoa(a.wait()*1000)))
		return nil, status.Error(codes.ResourceExhausted, "slow down")
	case aUnavailableWait:
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcmw.PushbackTrailer, strconv.Itoa(a.wait()*1000)))
		return nil, status.Error(codes.Unavailable, "backend down")
	case aAbort:
		g.b.drop()
		return nil, status.Error(codes.Internal, "not sent: the connection is gone")
	case aCut:
		_ = grpc.SendHeader(ctx, metadata.Pairs("x-answer", "cut"))
		g.b.drop()
		return nil, status.Error(codes.Internal, "not sent: the connection is gone")
	case aOKCut:
		_ = grpc.SendHeader(ctx, metadata.Pairs("x-answer", "cut"))
		g.b.drop()
		return &testgrpc.SimpleResponse{}, nil // not sent: the connection is gone
	case aLateBody:
		_ = grpc.SendHeader(ctx, metadata.Pairs("x-answer", "late"))
		time.Sleep(lateAnswer) // the bubble's clock: past the attempt's timeout
		return &testgrpc.SimpleResponse{}, nil
	case aRelayedOpen:
		return nil, relayedStatus(resilience.KindCircuitBreaker)
	case aRelayedFull:
		return nil, relayedStatus(resilience.KindBulkhead)
	case aRelayedLimit:
		return nil, relayedStatus(resilience.KindRateLimiter)
	default:
		panic(a)
	}
}

// relayedStatus is a rejection of kind k as a meshless client one hop
// down puts it on the wire (grpcmw.RejectionError), passed on unchanged.
func relayedStatus(k resilience.Kind) error {
	st := status.New(codes.Code(k.GRPCCode()), "downstream: "+k.Reason())
	st, err := st.WithDetails(&errdetails.ErrorInfo{Reason: k.Reason(), Domain: grpcmw.ErrorDomain,
		Metadata: map[string]string{"name": "downstream"}})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// httpBackend serves the script on every path.
func httpBackend(b *backend) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b.handlers.Add(1)
		defer b.handlers.Done()
		answer := func(code int, body string) {
			w.WriteHeader(code)
			io.WriteString(w, body) //nolint:errcheck
		}
		switch a := b.next(); a {
		case aOK:
			answer(http.StatusOK, "ok")
		case aSlow:
			time.Sleep(slowAnswer) // the bubble's clock: a slow backend
			answer(http.StatusOK, "ok")
		case aLate:
			time.Sleep(lateAnswer) // the bubble's clock: past the attempt's timeout
			answer(http.StatusOK, "ok")
		case aNotFound:
			answer(http.StatusNotFound, msgNotFound)
		case aInvalid:
			answer(http.StatusBadRequest, msgInvalid)
		case aUnimplemented:
			answer(http.StatusNotImplemented, msgUnimplemented)
		case aCancelled:
			answer(499, "gave up upstream")
		case aUnavailable:
			answer(http.StatusServiceUnavailable, "backend down")
		case aInternal:
			answer(http.StatusInternalServerError, "backend bug")
		case aBadGateway:
			answer(http.StatusBadGateway, "bad gateway")
		case aGatewayTimeout:
			answer(http.StatusGatewayTimeout, "upstream timed out")
		case aUnknown:
			answer(http.StatusInternalServerError, msgUnknown)
		case aDataLoss:
			answer(http.StatusInternalServerError, msgDataLoss)
		case aExhausted:
			answer(http.StatusTooManyRequests, "quota exceeded")
		case aHang:
			hang(r.Context())
		case aPushback, aPushbackLong, aPushbackNow:
			w.Header().Set("Retry-After", strconv.Itoa(a.wait()))
			answer(http.StatusTooManyRequests, "slow down")
		case aUnavailableWait:
			w.Header().Set("Retry-After", strconv.Itoa(a.wait()))
			answer(http.StatusServiceUnavailable, "backend down")
		case aAbort:
			b.abort(r)
			panic(http.ErrAbortHandler) // net/http closes the connection, with no response
		case aCut:
			w.Header().Set("Content-Length", "64")
			answer(http.StatusServiceUnavailable, "backend d")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the body ends 55 bytes short
		case aOKCut:
			w.Header().Set("Content-Length", "64")
			answer(http.StatusOK, "o")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the body ends 63 bytes short
		case aLateBody:
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			time.Sleep(lateAnswer)  // the bubble's clock: past the attempt's timeout
			io.WriteString(w, "ok") //nolint:errcheck
		case aRelayedOpen:
			relayedResponse(w, resilience.KindCircuitBreaker)
		case aRelayedFull:
			relayedResponse(w, resilience.KindBulkhead)
		case aRelayedLimit:
			relayedResponse(w, resilience.KindRateLimiter)
		default:
			panic(a)
		}
	}
}

// relayedResponse answers as a meshless service does that got a rejection
// of kind k from its own client (httpmw.WriteRejection): its status,
// Retry-After and httpmw.ReasonHeader.
func relayedResponse(w http.ResponseWriter, k resilience.Kind) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set(httpmw.ReasonHeader, k.Reason())
	w.WriteHeader(k.HTTPStatus())
	io.WriteString(w, "downstream: "+k.Reason()) //nolint:errcheck
}
