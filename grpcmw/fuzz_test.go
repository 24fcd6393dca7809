package grpcmw_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// FuzzPushback: whatever a server sends in grpc-retry-pushback-ms, reading
// it never panics, and gives either "do not retry" (-1) or a delay in
// [0, 2^31-1] ms; a delay's decimal form reads back as that delay.
func FuzzPushback(f *testing.F) {
	for _, v := range []string{"0", "250", "2147483647", "2147483648", "-1", "+5", " 5", "5.5", "soon", "", "0005",
		"99999999999999999999", "１２", "5\x00"} {
		f.Add(v, false)
	}
	f.Add("100", true)
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		md := metadata.MD{grpcmw.PushbackTrailer: {v}}
		if twice {
			md[grpcmw.PushbackTrailer] = append(md[grpcmw.PushbackTrailer], v)
		}
		d, ok := grpcmw.Pushback(md)
		if !ok {
			t.Fatalf("Pushback(%q): a trailer sent is not read", v)
		}
		if d != -1 && (d < 0 || d > (1<<31-1)*time.Millisecond || d%time.Millisecond != 0) {
			t.Fatalf("Pushback(%q) = %v, out of bounds", v, d)
		}
		if twice && d != -1 {
			t.Fatalf("Pushback of a trailer sent twice = %v, want -1", d)
		}
		if d < 0 {
			return
		}
		if again, _ := grpcmw.Pushback(metadata.MD{grpcmw.PushbackTrailer: {strconv.FormatInt(d.Milliseconds(), 10)}}); again != d {
			t.Fatalf("Pushback(%q) = %v; its decimal form reads back as %v", v, d, again)
		}
	})
}

// FuzzRejectionReason: whatever status a server sends, reading the
// rejection it relays never panics, and a reason read is one of meshless's,
// on its own code, named by an ErrorInfo of meshless's domain.
func FuzzRejectionReason(f *testing.F) {
	add := func(c codes.Code, infos ...*errdetails.ErrorInfo) {
		st := status.New(c, "refused")
		for _, info := range infos {
			st, _ = st.WithDetails(info)
		}
		b, err := proto.Marshal(st.Proto())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	add(codes.Unavailable, &errdetails.ErrorInfo{Domain: grpcmw.ErrorDomain, Reason: grpcmw.ReasonCircuitOpen, Metadata: map[string]string{"name": "x", "state": "OPEN"}})
	add(codes.ResourceExhausted, &errdetails.ErrorInfo{Domain: "example.com", Reason: "X"}, &errdetails.ErrorInfo{Domain: grpcmw.ErrorDomain, Reason: grpcmw.ReasonRateLimited})
	add(codes.ResourceExhausted, &errdetails.ErrorInfo{Domain: grpcmw.ErrorDomain, Reason: grpcmw.ReasonCircuitOpen})
	add(codes.Internal, &errdetails.ErrorInfo{Domain: grpcmw.ErrorDomain, Reason: grpcmw.ReasonBulkheadFull})
	add(codes.Unavailable)
	f.Add([]byte{0x08, 0x0e, 0x1a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p spb.Status
		if proto.Unmarshal(b, &p) != nil {
			return
		}
		st := status.FromProto(&p)
		reason := grpcmw.RejectionReason(st.Err()) // must not panic
		if reason == "" {
			return
		}
		k, ok := resilience.KindOfReason(reason)
		if !ok || uint32(st.Code()) != k.GRPCCode() {
			t.Fatalf("reason %q read from a status of code %v", reason, st.Code())
		}
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == grpcmw.ErrorDomain && info.GetReason() == reason {
				return
			}
		}
		t.Fatalf("reason %q read from %v, which names it in no ErrorInfo of meshless's domain", reason, st.Proto())
	})
}
