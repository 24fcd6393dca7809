package grpcmw_test

import (
	"strings"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
)

// The descriptors of grpc.testing are linked in.
var _ testgrpc.TestServiceClient

func TestIssue9NamesAreChecked(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // the whole error; "" for none
	}{
		{name: "typo in a service", yaml: "services:\n  grpc.testing.TestServce: {}\n",
			want: `services."grpc.testing.TestServce": unknown service: package grpc.testing, linked into this program, has no service TestServce; did you mean grpc.testing.TestService? (line 2)`},
		{name: "typo in a method", yaml: "services:\n  grpc.testing.TestService:\n    methods:\n      UnaryCal: { retry: { maxAttempts: 1 } }\n",
			want: `services."grpc.testing.TestService".methods.UnaryCal: unknown method: grpc.testing.TestService, linked into this program, has no method UnaryCal; did you mean UnaryCall? (line 4)`},
		{name: "no close method", yaml: "services: { grpc.testing.TestService: { methods: { Charge: {} } } }",
			want: `services."grpc.testing.TestService".methods.Charge: unknown method: grpc.testing.TestService, linked into this program, has no method Charge (it has EmptyCall, UnaryCall, CacheableUnaryCall, StreamingOutputCall, StreamingInputCall, FullDuplexCall, HalfDuplexCall, UnimplementedCall) (line 1)`},
		{name: "a message", yaml: "services: { grpc.testing.SimpleRequest: {} }",
			want: `services."grpc.testing.SimpleRequest": names a protobuf message, not a service (line 1)`},
		{name: "known names", yaml: "services: { grpc.testing.TestService: { methods: { UnaryCall: {}, FullDuplexCall: {} } } }"},
		{name: "a package the program does not link", yaml: "services: { payment.PaymentService: { methods: { Charge: {} } } }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcmw.ParseConfig([]byte(tt.yaml))
			got := ""
			if err != nil {
				got = strings.TrimPrefix(err.Error(), "grpcmw: config: ")
			}
			if got != tt.want {
				t.Fatalf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
