// Command basic is the smallest useful meshless client: a gRPC client whose
// calls pass a circuit breaker, retries, a bulkhead and timeouts configured
// by one YAML file. Without -target it starts a gRPC health server in the
// process, so it runs with nothing installed:
//
//	go run ./examples/basic
//	go run ./examples/basic -target dns:///payments.prod.svc:8080
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

//go:embed client.yaml
var clientYAML []byte

func main() {
	target := flag.String("target", "", "the gRPC server to call (default: one started in this process)")
	flag.Parse()
	if *target == "" {
		addr, stop := serveHealth()
		defer stop()
		*target = addr
	}

	cfg, err := grpcmw.ParseConfig(clientYAML) // from a file: grpcmw.LoadConfig("client.yaml")
	if err != nil {
		log.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer chain.Close()
	conn, err := grpc.NewClient(*target, append(chain.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "no.such.Service"} {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			// NOT_FOUND is a business answer: it reaches us unchanged, is not
			// retried and is not a failure for the breaker.
			fmt.Printf("Check(%q): error %v\n", service, status.Code(err))
			continue
		}
		fmt.Printf("Check(%q): %v\n", service, resp.GetStatus())
	}
	cb, _ := chain.Breaker("grpc.health.v1.Health")
	fmt.Println("breaker:", cb.State())
}
