package grpcmw_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/meshless/meshless/grpcmw"
)

// The interceptor reuses the value that carries an unhedged unary call
// through the engine: calls at once, one after another, and after a call
// that panicked, each gets its own request, reply, options and trailer, and
// none sees another's — with options of the caller's (every even call) and
// without (the odd ones: gRPC then gets the reused value's own trailer
// option).
func TestUnaryCallsDoNotShareState(t *testing.T) {
	chain, err := grpcmw.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	icpt := chain.UnaryClientInterceptor()
	const method = "/grpc.testing.TestService/UnaryCall"
	invoke := func(_ context.Context, _ string, req, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		name := req.(*testgrpc.SimpleRequest).GetResponseType().String() + fmt.Sprint(req.(*testgrpc.SimpleRequest).GetResponseSize())
		if req.(*testgrpc.SimpleRequest).GetFillUsername() {
			panic("the invoker panics")
		}
		var own, trailers int
		for _, o := range opts {
			switch o := o.(type) {
			case grpc.HeaderCallOption:
				if (*o.HeaderAddr)["name"][0] != name {
					return fmt.Errorf("call %s got call %s's header option", name, (*o.HeaderAddr)["name"][0])
				}
				own++
			case grpc.TrailerCallOption:
				if *o.TrailerAddr != nil {
					return fmt.Errorf("call %s's trailer already holds %v", name, *o.TrailerAddr)
				}
				*o.TrailerAddr = metadata.Pairs("name", name)
				trailers++
			}
		}
		wantOwn := 1 - int(req.(*testgrpc.SimpleRequest).GetResponseSize()%2)
		if own != wantOwn || trailers != 1 || len(opts) != wantOwn+1 {
			return fmt.Errorf("call %s got %d options, %d header options of its own and %d trailers, want %d, %d and 1", name, len(opts), own, trailers, wantOwn+1, wantOwn)
		}
		runtime.Gosched() // lets a call that would share this one's state run
		if got := req.(*testgrpc.SimpleRequest).GetResponseType().String() + fmt.Sprint(req.(*testgrpc.SimpleRequest).GetResponseSize()); got != name {
			return fmt.Errorf("call %s's request became call %s's", name, got)
		}
		reply.(*testgrpc.SimpleResponse).Username = name
		return nil
	}
	call := func(g, i int) error {
		req := &testgrpc.SimpleRequest{ResponseSize: int32(g*1000 + i)}
		name := req.GetResponseType().String() + fmt.Sprint(req.GetResponseSize())
		reply := new(testgrpc.SimpleResponse)
		header := metadata.Pairs("name", name)
		var opts []grpc.CallOption
		if i%2 == 0 {
			opts = append(opts, grpc.Header(&header))
		}
		if err := icpt(t.Context(), method, req, reply, nil, invoke, opts...); err != nil {
			return err
		}
		if reply.GetUsername() != name {
			return fmt.Errorf("call %s got call %q's reply", name, reply.GetUsername())
		}
		return nil
	}
	t.Run("after a panic", func(t *testing.T) {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the invoker's panic did not go on up")
				}
			}()
			_ = icpt(t.Context(), method, &testgrpc.SimpleRequest{FillUsername: true}, new(testgrpc.SimpleResponse), nil, invoke)
		}()
		for i := range 10 {
			if err := call(0, i); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("at once", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					if err := call(g+1, i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
