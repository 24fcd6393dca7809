package grpcmw_test

import (
	"strings"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

// A Config built in Go has its service and method names checked against the
// linked descriptors as ParseConfig checks a file's: New and Reload refuse a
// typo with the same message (without a line). Before, they accepted it and
// the misspelt service's settings silently never applied.
func TestGoBuiltConfigNamesAreChecked(t *testing.T) {
	tests := []struct {
		name string
		cfg  *grpcmw.Config
		want string // "" for none
	}{
		{name: "typo in a service", cfg: &grpcmw.Config{Services: map[string]*config.Service{
			"grpc.testing.TestServce": {Policies: config.Policies{Retry: &config.RetrySection{MaxAttempts: config.Ptr(1)}}}}},
			want: `services."grpc.testing.TestServce": unknown service: package grpc.testing, linked into this program, has no service TestServce; did you mean grpc.testing.TestService?`},
		{name: "typo in a method", cfg: &grpcmw.Config{Services: map[string]*config.Service{
			"grpc.testing.TestService": {Methods: map[string]*config.Policies{"UnaryCal": {}}}}},
			want: `services."grpc.testing.TestService".methods.UnaryCal: unknown method: grpc.testing.TestService, linked into this program, has no method UnaryCal; did you mean UnaryCall?`},
		{name: "a message", cfg: &grpcmw.Config{Services: map[string]*config.Service{"grpc.testing.SimpleRequest": nil}},
			want: `services."grpc.testing.SimpleRequest": names a protobuf message, not a service`},
		{name: "known names", cfg: &grpcmw.Config{Services: map[string]*config.Service{
			"grpc.testing.TestService": {Methods: map[string]*config.Policies{"UnaryCall": nil}}}}},
		{name: "a package the program does not link", cfg: &grpcmw.Config{Services: map[string]*config.Service{
			"payment.PaymentService": {Methods: map[string]*config.Policies{"Charge": {}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errText := func(err error) string {
				if err == nil {
					return ""
				}
				return strings.TrimPrefix(err.Error(), "grpcmw: config: ")
			}
			c, err := grpcmw.New(tt.cfg)
			if got := errText(err); got != tt.want {
				t.Fatalf("New: error:\n%s\nwant:\n%s", got, tt.want)
			}
			if c == nil {
				c, err = grpcmw.New(nil)
				if err != nil {
					t.Fatal(err)
				}
			}
			defer c.Close()
			if got := errText(c.Reload(tt.cfg)); got != tt.want {
				t.Fatalf("Reload: error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
