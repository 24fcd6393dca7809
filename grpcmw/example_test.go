package grpcmw_test

import (
	"fmt"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

// A configuration with a mistake in it: every problem is reported with its
// path.
func ExampleParseConfig() {
	_, err := grpcmw.ParseConfig([]byte(`
defaults:
  retry: { maxAttempts: 3, retryableStatusCodes: [UNAVAILABLE] }
services:
  payment.PaymentService:
    circuitBreaker: { failureRateThreshold: 150 }
    methods:
      Charge:
        retry: { maxAttempts: 1 }
        timeout: { perAttemp: 2s }
`))
	fmt.Println(err)
	// Output:
	// grpcmw: config: services."payment.PaymentService".methods.Charge.timeout.perAttemp: unknown key (known here: enabled, overall, perAttempt) (line 10)
	// services."payment.PaymentService".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150
}

// A Config can be written in Go as well, and marshals to YAML.
func ExampleConfig_Marshal() {
	cfg := &grpcmw.Config{
		Services: map[string]*config.Service{
			"payment.PaymentService": {
				Methods: map[string]*config.Policies{
					"Charge": {Retry: &config.RetrySection{MaxAttempts: config.Ptr(1)}},
				},
			},
		},
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	out, _ := cfg.Marshal()
	fmt.Print(string(out))
	// Output:
	// services:
	//     payment.PaymentService:
	//         methods:
	//             Charge:
	//                 retry:
	//                     maxAttempts: 1
}

// New builds the chain; its dial options install the interceptors.
func ExampleNew() {
	cfg, _ := grpcmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { failureRateThreshold: 30 }
  timeout: { perAttempt: 500ms, overall: 2s }
`))
	chain, err := grpcmw.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(chain.DialOptions()), "dial options")
	// conn, err := grpc.NewClient(target, append(chain.DialOptions(), creds)...)
	// Output: 2 dial options
}
