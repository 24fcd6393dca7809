package config_test

import (
	"fmt"

	"github.com/meshless/meshless/config"
)

// One document configures gRPC services and HTTP hosts; an HTTP route's
// status codes are HTTP status numbers.
func ExampleConfig_Route() {
	cfg, err := config.Parse([]byte(`
defaults:
  retry: { maxAttempts: 2 }
hosts:
  api.weather.example:
    routes:
      "GET /v1/current/{city}":
        retry: { maxAttempts: 3 }
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	m := cfg.Route("api.weather.example", "GET /v1/current/{city}")
	fmt.Println(m.Key, m.Retry.MaxAttempts, m.FailureCodes, m.RetryableCodes)
	other := cfg.Route("other.example", "_OTHER")
	fmt.Println(other.Retry.MaxAttempts, other.FailureCodes)
	// Output:
	// api.weather.example 3 [500 502 503 504] [502 503 504]
	// 2 [500 502 503 504]
}
