package grpcmw

import (
	"runtime"

	"google.golang.org/grpc"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Header returns the header of the attempt that answers the call. As with
// grpc-go's own retry (gRFC A6), Header takes part in the retry: an attempt
// that ended without a header (a Trailers-Only failure, which grpc-go's
// ClientStream.Header reports as no header and no error) is retried, while
// the policy allows, and Header returns the next attempt's header. So is
// the header of an attempt whose failure a RecvMsg already read, and
// retries: Header waits for the retry and returns the next attempt's.
// Headers that reach the caller commit the call: what the caller saw is not
// replaced by another attempt's; for a stream admitted as a half-open probe
// they are its verdict, a success, as a first response is. A call that ends without a header (its
// attempts ran out, or it failed or ended OK at once) returns no header and
// no error, as gRPC's: RecvMsg returns its status.
func (cs *clientStream) Header() (metadata.MD, error) {
	defer runtime.KeepAlive(cs) // its cleanup ends the stream: not while a method runs
	s := cs.streamState
	for {
		s.mu.Lock()
		cur, n := s.cur, s.attempts
		s.mu.Unlock()
		md, err := s.headerOf(cur)
		s.mu.Lock()
		for s.attempts == n && s.waiting {
			s.over.Wait() // that attempt failed and is being retried
		}
		if s.attempts != n {
			s.mu.Unlock()
			continue // a retry replaced it: its header is not the call's
		}
		if md != nil || err != nil {
			if err == nil {
				s.answeredLocked() // a half-open probe's verdict too
			}
			s.mu.Unlock()
			return md, err
		}
		// The attempt ended without a header: its status decides.
		for s.attempts == n && (s.reading || s.waiting) {
			s.over.Wait() // RecvMsg reads that status, or retries
		}
		if s.attempts != n {
			s.mu.Unlock()
			continue // a retry opened the next attempt: its header
		}
		if !s.replay || s.committed || s.done {
			s.mu.Unlock()
			return nil, nil
		}
		// No RecvMsg is under way: read the attempt's status here (the
		// stream has ended, so no response can come), and retry it as
		// RecvMsg would.
		err = s.readLocked(cur, new(emptypb.Empty))
		if err == nil {
			err = status.Error(codes.Internal, "grpcmw: a response after a stream ended without a header")
			s.finishLocked(err, err)
		}
		_, again := s.failedLocked(err)
		s.mu.Unlock()
		if !again {
			return nil, nil
		}
	}
}

// headerOf returns cur's header, read without the lock; when cur.Header
// panics, the stream ends as a call that panics (panickedLocked).
func (s *streamState) headerOf(cur grpc.ClientStream) (metadata.MD, error) {
	returned := false
	defer s.guard(&returned)
	md, err := cur.Header()
	returned = true
	return md, err
}
