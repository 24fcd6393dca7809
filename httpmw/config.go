package httpmw

import (
	"errors"
	"fmt"

	"github.com/meshless/meshless/config"
)

// Config is one client's resilience configuration: package config's
// [config.Config], the same document grpcmw reads (its hosts section is
// HTTP's, its defaults serve both transports). Its sections are package
// config's types.
type Config = config.Config

// ParseConfig parses a YAML (or JSON) configuration strictly (see
// config.Parse): an unknown key, a wrong type or an out-of-range value is an
// error that names its path, such as
//
//	hosts."api.weather.example".routes."GET /v1/current/{city}".retry.maxAttempts: must be in [1, 100], got 0
//
// A route pattern that net/http's ServeMux refuses (or that conflicts with
// another route of its host) is an error too. The sections only gRPC reads
// (services, outlierDetection, healthCheck) are checked as far as package
// config checks them; grpcmw.ParseConfig checks them against gRPC.
func ParseConfig(data []byte) (*Config, error) {
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, configError(err)
	}
	return cfg, nil
}

// LoadConfig reads and parses the configuration file at path. A file
// larger than config.MaxConfigSize is refused without being read past the
// limit.
func LoadConfig(path string) (*Config, error) {
	data, err := config.ReadFile(path)
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		return nil, fmt.Errorf("%s: %w", path, configError(err))
	case err != nil:
		return nil, fmt.Errorf("httpmw: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// validate checks cfg as an HTTP client's configuration.
func validate(cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return configError(err)
	}
	return nil
}

func configError(err error) error { return fmt.Errorf("httpmw: config: %w", err) }
