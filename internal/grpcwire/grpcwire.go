package grpcwire

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/resilience"
)

// ErrorDomain is the ErrorInfo domain of meshless's rejections.
const ErrorDomain = "meshless.dev"

// Status returns the status of a local rejection of kind k: k's gRPC code,
// msg, and an ErrorInfo with k's reason and md.
func Status(k resilience.Kind, msg string, md map[string]string) *status.Status {
	if k.Reason() == "" {
		return status.New(codes.Unavailable, msg)
	}
	st := status.New(codes.Code(k.GRPCCode()), msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: k.Reason(), Domain: ErrorDomain, Metadata: md}); err == nil {
		return d
	}
	return st
}

// Relayed returns the kind of meshless rejection st carries: an ErrorInfo
// of meshless's domain whose reason a kind names, on a status with that
// kind's code. It reads the details without decoding those of other types.
func Relayed(st *status.Status) (resilience.Kind, bool) {
	if st == nil {
		return 0, false
	}
	c := st.Code()
	if c != codes.Unavailable && c != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Proto().GetDetails() {
		var info errdetails.ErrorInfo
		if !d.MessageIs(&info) || d.UnmarshalTo(&info) != nil || info.GetDomain() != ErrorDomain {
			continue
		}
		if k, ok := resilience.KindOfReason(info.GetReason()); ok && uint32(c) == k.GRPCCode() {
			return k, true
		}
	}
	return 0, false
}
