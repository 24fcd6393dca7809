package grpcwire

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/resilience"
)

// ErrorDomain is the ErrorInfo domain of meshless's rejections.
const ErrorDomain = "meshless.dev"

// Status returns the status of a local rejection of kind k: k's gRPC code,
// msg, and an ErrorInfo with k's reason and md.
//
// Invalid UTF-8 in msg or md (a policy's name, a dead-letter key) is
// replaced with U+FFFD: proto3 strings must be UTF-8, and a status that does
// not marshal goes out without its ErrorInfo, a rejection no longer
// meshless's one hop up.
func Status(k resilience.Kind, msg string, md map[string]string) *status.Status {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if k.Reason() == "" {
		return status.New(codes.Unavailable, msg)
	}
	st := status.New(codes.Code(k.GRPCCode()), msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: k.Reason(), Domain: ErrorDomain, Metadata: validUTF8(md)}); err == nil {
		return d
	}
	return st
}

// validUTF8 returns md, or a copy of it with invalid UTF-8 replaced.
func validUTF8(md map[string]string) map[string]string {
	for k, v := range md {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			out := make(map[string]string, len(md))
			for k, v := range md {
				out[strings.ToValidUTF8(k, "\uFFFD")] = strings.ToValidUTF8(v, "\uFFFD")
			}
			return out
		}
	}
	return md
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
