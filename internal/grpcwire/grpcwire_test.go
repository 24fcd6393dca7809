package grpcwire_test

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/resilience"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A rejection put on the wire reads back as its kind; a status with another
// domain, another code or an unknown reason is not one of meshless's.
func TestStatusReadsBack(t *testing.T) {
	for _, k := range []resilience.Kind{resilience.KindCircuitBreaker, resilience.KindBulkhead, resilience.KindRateLimiter, resilience.KindThrottler, resilience.KindDeadLetter} {
		st := grpcwire.Status(k, "refused", map[string]string{"name": "x"})
		if uint32(st.Code()) != k.GRPCCode() {
			t.Errorf("%v: code %v, want %d", k, st.Code(), k.GRPCCode())
		}
		if got, ok := grpcwire.Relayed(st); !ok || got != k {
			t.Errorf("%v: Relayed = %v, %v", k, got, ok)
		}
	}
	info := func(c codes.Code, domain, reason string) *status.Status {
		st, err := status.New(c, "x").WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for name, st := range map[string]*status.Status{
		"another domain":    info(codes.Unavailable, "example.com", resilience.ReasonCircuitOpen),
		"another code":      info(codes.Internal, grpcwire.ErrorDomain, resilience.ReasonCircuitOpen),
		"a mismatched code": info(codes.ResourceExhausted, grpcwire.ErrorDomain, resilience.ReasonCircuitOpen),
		"an unknown reason": info(codes.Unavailable, grpcwire.ErrorDomain, "SOMETHING"),
		"no details":        status.New(codes.Unavailable, "x"),
		"nil":               nil,
	} {
		if k, ok := grpcwire.Relayed(st); ok {
			t.Errorf("%s: Relayed = %v, want none", name, k)
		}
	}
	if st := grpcwire.Status(resilience.KindRetry, "x", nil); st.Code() != codes.Unavailable || len(st.Details()) != 0 {
		t.Errorf("a kind without a reason: %v", st)
	}
}

// FuzzRelayed: whatever status comes back, reading it never panics; a kind
// read is one whose code the status has and whose reason an ErrorInfo of
// meshless's domain names; a rejection put on the wire reads back as its
// kind, whatever its message and metadata.
func FuzzRelayed(f *testing.F) {
	for _, k := range []resilience.Kind{resilience.KindCircuitBreaker, resilience.KindBulkhead, resilience.KindRateLimiter, resilience.KindThrottler, resilience.KindDeadLetter} {
		b, err := proto.Marshal(grpcwire.Status(k, "refused", map[string]string{"name": "x"}).Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(k))
	}
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{0x08, 0x0e, 0x1a, 0x02, 0x0a, 0x00}, uint8(63))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		var p spb.Status
		if proto.Unmarshal(b, &p) == nil {
			st := status.FromProto(&p)
			if k, ok := grpcwire.Relayed(st); ok {
				named := false
				for _, d := range st.Details() {
					if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == grpcwire.ErrorDomain && info.GetReason() == k.Reason() {
						named = true
					}
				}
				if k.Reason() == "" || uint32(st.Code()) != k.GRPCCode() || !named {
					t.Fatalf("Relayed(%v) = %v", st.Proto(), k)
				}
			}
		}
		k := resilience.Kind(kind % 64)
		// As the server sends it and the client reads it back.
		wire, err := proto.Marshal(grpcwire.Status(k, string(b), map[string]string{"name": string(b), string(b): "x"}).Proto())
		if err != nil {
			t.Fatalf("a rejection of %v does not marshal: %v", k, err)
		}
		var back spb.Status
		if err := proto.Unmarshal(wire, &back); err != nil {
			t.Fatal(err)
		}
		if got, ok := grpcwire.Relayed(status.FromProto(&back)); k.Reason() != "" && (!ok || got != k) || k.Reason() == "" && ok {
			t.Fatalf("a rejection of %v reads back as %v, %v", k, got, ok)
		}
	})
}
