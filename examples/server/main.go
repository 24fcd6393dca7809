// Command server sheds load on a gRPC server with grpcmw's server
// interceptors: each service gets a bulkhead, and a call past its limit is
// answered at once with RESOURCE_EXHAUSTED, the reason BULKHEAD_FULL and a
// grpc-retry-pushback-ms trailer, without running the handler.
//
//	go run ./examples/server
//	go run ./examples/server -limit 4 -extra 5 -pushback 250ms
//
// It fills the server with calls that wait, sends more from a plain gRPC
// client (shed), sends one from a meshless client that retries
// RESOURCE_EXHAUSTED (shed once, not retried), then lets the calls finish.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

var (
	//go:embed server.yaml
	serverYAML []byte
	//go:embed client.yaml
	clientYAML []byte
)

func main() {
	limit := flag.Int("limit", 2, "the server's bulkhead: calls in flight at once per service")
	extra := flag.Int("extra", 3, "calls a plain client sends while the server is full")
	pushback := flag.Duration("pushback", 500*time.Millisecond, "the delay a shed call's grpc-retry-pushback-ms trailer asks for")
	flag.Parse()
	if err := run(*limit, *extra, *pushback); err != nil {
		log.Fatal(err)
	}
}

func run(limit, extra int, pushback time.Duration) error {
	cfg, err := grpcmw.ParseConfig(serverYAML)
	if err != nil {
		return err
	}
	cfg.Defaults.Bulkhead.MaxConcurrentCalls = config.Ptr(limit)
	shed, err := grpcmw.NewServer(cfg, grpcmw.WithPushback(pushback))
	if err != nil {
		return err
	}
	defer shed.Close()

	svc := &service{entered: make(chan struct{}), release: make(chan struct{})}
	// count sees every call that reaches the server, before the shedding.
	count := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		svc.arrived.Add(1)
		return h(ctx, req)
	})
	srv := grpc.NewServer(append([]grpc.ServerOption{count}, shed.ServerOptions()...)...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(lis) })
	defer serving.Wait()
	defer srv.Stop()

	plain, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer plain.Close()
	client := testgrpc.NewTestServiceClient(plain)
	ctx := context.Background()

	fmt.Printf("server: a bulkhead of %d calls for grpc.testing.TestService (grpcmw.NewServer)\n\n", limit)
	// Fill the bulkhead with calls that wait in the handler.
	var waiting sync.WaitGroup
	for range limit {
		waiting.Go(func() {
			if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
				log.Printf("a waiting call failed: %v", err)
			}
		})
		<-svc.entered
	}
	fmt.Printf("%d calls are in the handler; the server is full\n", limit)

	for i := range extra {
		var trailer metadata.MD
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
		fmt.Printf("plain client, call %d: %v, reason %s, %s: %v\n", i+1, status.Code(err),
			grpcmw.RejectionReason(err), grpcmw.PushbackTrailer, trailer.Get(grpcmw.PushbackTrailer))
	}

	ccfg, err := grpcmw.ParseConfig(clientYAML)
	if err != nil {
		return err
	}
	chain, err := grpcmw.New(ccfg)
	if err != nil {
		return err
	}
	defer chain.Close()
	mconn, err := grpc.NewClient(lis.Addr().String(), append(chain.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return err
	}
	defer mconn.Close()
	before := svc.arrived.Load()
	_, err = testgrpc.NewTestServiceClient(mconn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	fmt.Printf("meshless client (retries RESOURCE_EXHAUSTED): %v, reason %s, attempts that reached the server: %d\n",
		status.Code(err), grpcmw.RejectionReason(err), svc.arrived.Load()-before)

	close(svc.release)
	waiting.Wait()
	_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	fmt.Printf("\nthe waiting calls answered; a new call: %v\n", status.Code(err))
	fmt.Printf("calls that reached the server: %d, handled: %d\n", svc.arrived.Load(), svc.handled.Load())
	return nil
}

// service is a TestService whose UnaryCall waits until release is closed.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	entered chan struct{} // a call entered the handler
	release chan struct{} // closed: every call may answer
	arrived atomic.Int64  // calls that reached the server, shed ones included
	handled atomic.Int64  // calls that ran the handler
}

func (s *service) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.handled.Add(1)
	select {
	case s.entered <- struct{}{}:
	case <-s.release:
	}
	select {
	case <-s.release:
		return &testgrpc.SimpleResponse{}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}
