package grpcmw_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// soakArrival is one attempt of a call as the server saw it.
type soakArrival struct {
	prev     int      // its grpc-previous-rpc-attempts
	notFound bool     // the handler answered NOT_FOUND
	got      []string // the request messages it read, in order
}

// soakServer is a TestService whose streaming handlers fail at random, and
// that records each attempt of each call (by the soak-id header).
type soakServer struct {
	testgrpc.UnimplementedTestServiceServer

	mu    sync.Mutex
	calls map[string][]*soakArrival
}

// begin records an attempt's arrival, and sets its attempt number in the
// header it will send.
func (s *soakServer) begin(ss grpc.ServerStream) *soakArrival {
	md, _ := metadata.FromIncomingContext(ss.Context())
	a := &soakArrival{}
	if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 {
		a.prev, _ = strconv.Atoi(v[0])
	}
	_ = ss.SetHeader(metadata.Pairs(soakAttemptHeader, strconv.Itoa(a.prev)))
	id := strings.Join(md.Get(soakIDHeader), ",")
	s.mu.Lock()
	s.calls[id] = append(s.calls[id], a)
	s.mu.Unlock()
	return a
}

func (s *soakServer) got(a *soakArrival, body []byte) {
	s.mu.Lock()
	a.got = append(a.got, string(body))
	s.mu.Unlock()
}

// fail answers with a code drawn at random: UNAVAILABLE and INTERNAL are
// retried, NOT_FOUND never is.
func (s *soakServer) fail(a *soakArrival) error {
	code := []codes.Code{codes.Unavailable, codes.Unavailable, codes.Internal, codes.NotFound}[rand.IntN(4)]
	if code == codes.NotFound {
		s.mu.Lock()
		a.notFound = true
		s.mu.Unlock()
	}
	return status.Error(code, "soak")
}

// The faults a handler draws, once per attempt (soakFault).
const (
	soakOK         = iota // answer in full
	soakFailBefore        // fail before any response (trailers-only)
	soakFailAfter         // fail after some
	soakPanic             // panic, before or after some
	soakHang              // stop, until the attempt's context ends
	soakEmpty             // end OK at once, without a response (trailers-only)
	soakMany              // send many responses
)

// soakFault draws a handler's fault: hangs, which last until a timeout,
// are rarer than the others.
func soakFault() int {
	return [...]int{soakOK, soakOK, soakOK, soakFailBefore, soakFailBefore, soakFailBefore, soakFailAfter,
		soakFailAfter, soakFailAfter, soakPanic, soakHang, soakEmpty, soakEmpty, soakMany}[rand.IntN(14)]
}

func soakBody(prev, i int) []byte { return []byte(fmt.Sprintf("%d/%d", prev, i)) }

func (s *soakServer) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, ss testgrpc.TestService_StreamingOutputCallServer) error {
	a := s.begin(ss)
	n := len(req.GetResponseParameters())
	fault, k := soakFault(), rand.IntN(n+1)
	switch fault {
	case soakFailBefore:
		return s.fail(a)
	case soakEmpty:
		ss.SetTrailer(metadata.Pairs("soak-trailer", "empty"))
		return nil
	case soakMany:
		n = 50 + rand.IntN(100)
	case soakOK:
		k = n
	}
	for i := range k {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: soakBody(a.prev, i)}}); err != nil {
			return err
		}
	}
	switch fault {
	case soakFailAfter:
		return s.fail(a)
	case soakPanic:
		panic("soak: handler")
	case soakHang:
		<-ss.Context().Done()
		return status.FromContextError(ss.Context().Err()).Err()
	}
	for i := k; i < n; i++ {
		if err := ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: soakBody(a.prev, i)}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *soakServer) StreamingInputCall(ss testgrpc.TestService_StreamingInputCallServer) error {
	a := s.begin(ss)
	fault, k := soakFault(), rand.IntN(4)
	if rand.IntN(3) == 0 {
		_ = ss.SendHeader(nil)
	}
	switch fault {
	case soakFailBefore:
		return s.fail(a)
	case soakEmpty:
		return nil // no response: the client's error is INTERNAL
	}
	for i := 0; fault == soakOK || fault == soakMany || i < k; i++ {
		in, err := ss.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		s.got(a, in.GetPayload().GetBody())
	}
	switch fault {
	case soakFailAfter:
		return s.fail(a)
	case soakPanic:
		panic("soak: handler")
	case soakHang:
		<-ss.Context().Done()
		return status.FromContextError(ss.Context().Err()).Err()
	}
	// The response carries the attempt's number.
	return ss.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(a.prev)})
}

func (s *soakServer) FullDuplexCall(ss testgrpc.TestService_FullDuplexCallServer) error {
	a := s.begin(ss)
	fault, k := soakFault(), rand.IntN(4)
	if rand.IntN(3) == 0 {
		_ = ss.SendHeader(nil)
	}
	if fault == soakFailBefore {
		return s.fail(a)
	}
	if fault == soakEmpty {
		return nil
	}
	sent := 0
	send := func() error {
		sent++
		return ss.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: soakBody(a.prev, sent-1)}})
	}
	for i := 0; ; i++ {
		if i == k {
			switch fault {
			case soakFailAfter:
				return s.fail(a)
			case soakPanic:
				panic("soak: handler")
			case soakHang:
				<-ss.Context().Done()
				return status.FromContextError(ss.Context().Err()).Err()
			}
		}
		in, err := ss.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		s.got(a, in.GetPayload().GetBody())
		if err := send(); err != nil {
			return err
		}
		if fault == soakMany && i == 0 {
			for range 50 + rand.IntN(100) {
				if err := send(); err != nil {
					return err
				}
			}
		}
	}
}
