package grpcmw_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshless/meshless/grpcmw"
)

// An outlierDetection section that ParseConfig and New accept
// must give DialOptions a service config that grpc.NewClient accepts and
// that installs the outlier balancer. checkOutlier validates the section
// before its defaults are applied, so maxEjectionTime is compared with a
// *written* baseEjectionTime only (outlier/config.go: both > 0), while the
// balancer's own ParseConfig compares them after the defaults (30s, 300s);
// and a stdevFactor of +Inf passes validation but cannot be marshalled to
// JSON, so DialOptions silently drops the service config.
func TestAValidOutlierSectionDials(t *testing.T) {
	for _, doc := range []string{
		"outlierDetection: { maxEjectionTime: 1s }",   // below the default baseEjectionTime, 30s
		"outlierDetection: { baseEjectionTime: 10m }", // above the default maxEjectionTime, 300s
		"outlierDetection: { successRate: { stdevFactor: .inf } }",
	} {
		t.Run(doc, func(t *testing.T) {
			cfg, err := grpcmw.ParseConfig([]byte(doc))
			if err != nil {
				return // refused with an error: fine
			}
			chain, err := grpcmw.New(cfg)
			if err != nil {
				return
			}
			defer chain.Close()
			opts := chain.DialOptions()
			if len(opts) != 3 {
				t.Errorf("DialOptions has %d options: the service config that installs the outlier balancer is missing", len(opts))
			}
			conn, err := grpc.NewClient("passthrough:///127.0.0.1:1", append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				t.Fatalf("ParseConfig and New accepted it; grpc.NewClient refuses the chain's DialOptions: %v", err)
			}
			conn.Close()
		})
	}
}

// outlierDetection.interval below 10ms (0 aside: the default) is refused:
// every interval re-arms the detectors' timer, and 1ns kept a core busy per
// connection.
func TestAnOutlierIntervalBelowTenMillisecondsIsRefused(t *testing.T) {
	for _, v := range []string{"1ns", "9ms"} {
		if _, err := grpcmw.ParseConfig([]byte("outlierDetection: { interval: " + v + " }")); err == nil {
			t.Errorf("interval %s accepted", v)
		}
	}
	for _, v := range []string{"0s", "10ms", "1m"} {
		if _, err := grpcmw.ParseConfig([]byte("outlierDetection: { interval: " + v + " }")); err != nil {
			t.Errorf("interval %s refused: %v", v, err)
		}
	}
}
