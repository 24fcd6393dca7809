package main

import (
	"log"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveHealth starts a gRPC server with the standard health service on a
// loopback port, and returns its address and a function that stops it. It
// answers SERVING for "" and NOT_FOUND for a service it does not know.
func serveHealth() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil {
			log.Print(err)
		}
	}()
	return lis.Addr().String(), func() {
		srv.Stop()
		<-done
	}
}
