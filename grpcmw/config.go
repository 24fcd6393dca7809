package grpcmw

import (
	"errors"
	"fmt"

	"github.com/meshless/meshless/config"
)

// Config is one client's resilience configuration: package config's
// [config.Config], the same document httpmw reads. Its sections (services,
// policies, durations, status codes) are package config's types; build a
// Config in Go with them, or parse one with [ParseConfig] or [LoadConfig].
type Config = config.Config

// ParseConfig parses a YAML (or JSON) configuration strictly (see
// config.Parse): an unknown key, a wrong type or an out-of-range value is an
// error that names its path, such as
//
//	services."payment.PaymentService".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150
//
// Every problem found is reported, joined, up to [config.MaxConfigProblems].
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
// larger than [config.MaxConfigSize] is refused without being read past the limit.
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

// validate checks cfg as a gRPC client's configuration, with ParseConfig's
// checks: a Config built in Go has its service and method names checked
// against the linked descriptors as a parsed one has, so that a typo is an
// error rather than a service left on the defaults.
func validate(cfg *Config) error {
	if err := cfg.Validate(checkNames, checkOutlier); err != nil {
		return configError(err)
	}
	return nil
}

func configError(err error) error { return fmt.Errorf("grpcmw: config: %w", err) }
