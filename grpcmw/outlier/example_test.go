package outlier_test

import (
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshless/meshless/grpcmw/outlier"
)

// The balancer alone: a service config that ejects endpoints answering
// UNAVAILABLE five times in a row, and turns on gRPC's health checking.
func ExampleServiceConfigJSON() {
	cfg := outlier.Config{
		Interval:           5 * time.Second,
		FailureStatusCodes: []codes.Code{codes.Unavailable},
		FailurePercentage:  outlier.FailurePercentage{Disabled: true},
		SuccessRate:        outlier.SuccessRate{Disabled: true},
		SlowCalls:          outlier.SlowCalls{Disabled: true},
	}
	overall := ""
	sc, err := outlier.ServiceConfigJSON(cfg, &overall)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sc)
	// Output:
	// {"loadBalancingConfig":[{"meshless_outlier":{"interval":"5s","baseEjectionTime":"30s","maxEjectionTime":"5m0s","maxEjectionPercent":50,"consecutiveFailures":{"threshold":5},"failurePercentage":{"enabled":false,"threshold":85,"minimumHosts":3,"requestVolume":50},"successRate":{"enabled":false,"stdevFactor":1.9,"minimumHosts":3,"requestVolume":100},"slowCalls":{"enabled":false,"durationThreshold":"500ms","rateThreshold":50,"requestVolume":50},"failureStatusCodes":["UNAVAILABLE"],"childPolicy":"round_robin"}}],"healthCheckConfig":{"serviceName":""}}
}

// A Monitor gives Go code the ejected endpoints and a Listener (for metrics:
// otelmw.NewOutlierListener).
func ExampleMonitor() {
	mon, err := outlier.NewMonitor(outlier.WithListener(printListener{}))
	if err != nil {
		log.Fatal(err)
	}
	defer mon.Close()

	sc, err := outlier.ServiceConfigJSON(outlier.Config{Monitor: mon.Name()}, nil)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient("dns:///payments.default.svc.cluster.local:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	fmt.Println("ejected:", mon.Ejected())
	// Output:
	// ejected: []
}

type printListener struct{}

func (printListener) Ejected(addr, reason string) { fmt.Println("ejected", addr, "for", reason) }
func (printListener) Returned(addr string)        { fmt.Println(addr, "returned") }
