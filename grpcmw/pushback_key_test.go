package grpcmw_test

import (
	"testing"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/internal/grpcwire"
)

// The trailer the client reads pushback from (internal/grpcwire) is the one
// grpcmw names to servers: grpcmw.PushbackTrailer spells it out for its
// documentation, so the two constants are two spellings of one name.
func TestThePushbackTrailerReadIsTheOneGrpcmwNames(t *testing.T) {
	if grpcmw.PushbackTrailer != grpcwire.PushbackTrailer {
		t.Fatalf("grpcmw.PushbackTrailer = %q, but the client reads %q", grpcmw.PushbackTrailer, grpcwire.PushbackTrailer)
	}
}
