package grpcmw

import (
	"errors"
	"fmt"
	"time"

	"github.com/meshless/meshless/config"
)

// The configuration is package config's; these names keep grpcmw's own
// (grpcmw.Config, grpcmw.ParseConfig, …) for the programs that use them.
type (
	// Config is one client's resilience configuration (config.Config).
	Config = config.Config
	// Service configures one gRPC service (config.Service).
	Service = config.Service
	// Policies is one level's settings for each policy (config.Policies).
	Policies                  = config.Policies
	CircuitBreakerSection     = config.CircuitBreakerSection
	RetrySection              = config.RetrySection
	BulkheadSection           = config.BulkheadSection
	AdaptiveSection           = config.AdaptiveSection
	TimeoutSection            = config.TimeoutSection
	RetryThrottlingSection    = config.RetryThrottlingSection
	AdaptiveThrottlingSection = config.AdaptiveThrottlingSection
	RateLimiterSection        = config.RateLimiterSection
	HedgingSection            = config.HedgingSection
	ClusterSection            = config.ClusterSection
	RedisSection              = config.RedisSection
	OutlierDetectionSection   = config.OutlierDetectionSection
	FailurePercentageSection  = config.FailurePercentageSection
	SuccessRateSection        = config.SuccessRateSection
	SlowCallsSection          = config.SlowCallsSection
	HealthCheckSection        = config.HealthCheckSection
	// Duration is a time.Duration written as a Go duration string.
	Duration = config.Duration
	// Codes is a list of gRPC status codes (config.Codes).
	Codes = config.Codes
	// PathError is a problem with one value of a configuration.
	PathError = config.PathError
)

// Limits on a configuration document (see package config).
const (
	MaxConfigSize     = config.MaxConfigSize
	MaxConfigValues   = config.MaxConfigValues
	MaxConfigProblems = config.MaxConfigProblems
)

// The values of circuitBreaker.keyBy.
const (
	KeyByService = config.KeyByService
	KeyByMethod  = config.KeyByMethod
)

// Dur returns a pointer to d as a Duration, for building a [Config] in Go.
func Dur(d time.Duration) *Duration { return config.Dur(d) }

// Ptr returns a pointer to v, for building a [Config] in Go.
func Ptr[T any](v T) *T { return &v }

// ParseConfig parses a YAML (or JSON) configuration strictly (see
// config.Parse): an unknown key, a wrong type or an out-of-range value is an
// error that names its path, such as
//
//	services."payment.PaymentService".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150
//
// Every problem found is reported, joined, up to [MaxConfigProblems].
// Nothing is dropped or clamped. A service or method name that the protobuf
// descriptors linked into the program contradict is an error too (see
// docs/grpc.md), and so is an invalid outlierDetection section.
func ParseConfig(data []byte) (*Config, error) {
	cfg, err := config.Parse(data, checkNames, checkOutlier)
	if err != nil {
		return nil, configError(err)
	}
	return cfg, nil
}

// LoadConfig reads and parses the configuration file at path. A file
// larger than [MaxConfigSize] is refused without being read past the limit.
func LoadConfig(path string) (*Config, error) {
	data, err := config.ReadFile(path)
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		return nil, fmt.Errorf("%s: %w", path, configError(err))
	case err != nil:
		return nil, fmt.Errorf("grpcmw: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// validate checks cfg as a gRPC client's configuration.
func validate(cfg *Config) error {
	if err := cfg.Validate(checkOutlier); err != nil {
		return configError(err)
	}
	return nil
}

func configError(err error) error { return fmt.Errorf("grpcmw: config: %w", err) }
