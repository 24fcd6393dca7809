package grpcmw_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
)

// uncomparable is an error type that == cannot compare: a slice.
type uncomparable []string

func (u uncomparable) Error() string { return strings.Join(u, "; ") }

// A call that failed with an error of a type == cannot compare, and that
// its key's full queue does not keep, fails with that error: before, the
// engine compared the queue's answer with it and panicked.
func TestACallNotKeptFailsWithItsUncomparableError(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
  deadLetter: { on: [RETRIES_EXHAUSTED], path: ` + filepath.Join(t.TempDir(), "dl.db") + `, maxEntries: 1 }
`))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	fail := func(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
		return uncomparable{"a", "b"}
	}
	conn, err := grpc.NewClient("passthrough:///127.0.0.1:1", append(chain.DialOptions(),
		grpc.WithChainUnaryInterceptor(fail), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	for i := range 2 { // the first is kept, the second finds the key full
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("call %d panicked: %v", i, p)
				}
			}()
			_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
			if i == 1 && (err == nil || !strings.Contains(err.Error(), "a; b")) {
				t.Fatalf("call %d: %v, want the call's own error", i, err)
			}
		}()
	}
}
