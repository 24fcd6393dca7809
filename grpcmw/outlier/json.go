package outlier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/serviceconfig"
)

// jsonConfig is the balancer's JSON form in a service config. Durations are
// Go duration strings ("10s"); codes are canonical names or numbers.
type jsonConfig struct {
	Interval            *jsonDuration `json:"interval,omitempty"`
	BaseEjectionTime    *jsonDuration `json:"baseEjectionTime,omitempty"`
	MaxEjectionTime     *jsonDuration `json:"maxEjectionTime,omitempty"`
	MaxEjectionPercent  *int          `json:"maxEjectionPercent,omitempty"`
	ConsecutiveFailures *struct {
		Enabled   *bool `json:"enabled,omitempty"`
		Threshold int   `json:"threshold,omitempty"`
	} `json:"consecutiveFailures,omitempty"`
	FailurePercentage *struct {
		Enabled       *bool `json:"enabled,omitempty"`
		Threshold     int   `json:"threshold,omitempty"`
		MinimumHosts  int   `json:"minimumHosts,omitempty"`
		RequestVolume int   `json:"requestVolume,omitempty"`
	} `json:"failurePercentage,omitempty"`
	SuccessRate *struct {
		Enabled       *bool   `json:"enabled,omitempty"`
		StdevFactor   float64 `json:"stdevFactor,omitempty"`
		MinimumHosts  int     `json:"minimumHosts,omitempty"`
		RequestVolume int     `json:"requestVolume,omitempty"`
	} `json:"successRate,omitempty"`
	SlowCalls *struct {
		Enabled           *bool         `json:"enabled,omitempty"`
		DurationThreshold *jsonDuration `json:"durationThreshold,omitempty"`
		RateThreshold     int           `json:"rateThreshold,omitempty"`
		RequestVolume     int           `json:"requestVolume,omitempty"`
	} `json:"slowCalls,omitempty"`
	FailureStatusCodes []jsonCode `json:"failureStatusCodes,omitempty"`
	ChildPolicy        string     `json:"childPolicy,omitempty"`
	Monitor            string     `json:"monitor,omitempty"`
}

type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"10s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"10s\", got %q", s)
	}
	*d = jsonDuration(v)
	return nil
}

type jsonCode codes.Code

func (c jsonCode) MarshalJSON() ([]byte, error) {
	return json.Marshal(codeName(codes.Code(c)))
}

func (c *jsonCode) UnmarshalJSON(b []byte) error {
	code, err := parseCode(string(b))
	if err != nil {
		return err
	}
	*c = jsonCode(code)
	return nil
}

var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return strconv.Itoa(int(c))
}

// parseCode reads a JSON code: a canonical name in any case, or a number
// 0-16.
func parseCode(raw string) (codes.Code, error) {
	if n, err := strconv.Atoi(raw); err == nil && n >= 0 && n <= 16 {
		return codes.Code(n), nil
	}
	if s, err := strconv.Unquote(raw); err == nil {
		for i, name := range codeNames {
			if strings.EqualFold(s, name) {
				return codes.Code(i), nil
			}
		}
	}
	return 0, fmt.Errorf("want a gRPC code name (UNAVAILABLE) or number 0-16, got %s", raw)
}

// lbConfig is the parsed LoadBalancingConfig.
type lbConfig struct {
	serviceconfig.LoadBalancingConfig
	cfg     Config   // defaults resolved
	monitor *Monitor // nil if cfg.Monitor is ""
}

// parseConfig reads the balancer's JSON form into a Config (defaults not
// resolved), and validates it.
func parseConfig(js []byte) (Config, error) {
	var j jsonConfig
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Config{}, fmt.Errorf("%s: outlierDetection: %w", Name, err)
	}
	var c Config
	if j.Interval != nil {
		c.Interval = time.Duration(*j.Interval)
	}
	if j.BaseEjectionTime != nil {
		c.BaseEjectionTime = time.Duration(*j.BaseEjectionTime)
	}
	if j.MaxEjectionTime != nil {
		c.MaxEjectionTime = time.Duration(*j.MaxEjectionTime)
	}
	if j.MaxEjectionPercent != nil {
		c.MaxEjectionPercent = *j.MaxEjectionPercent
	}
	off := func(b *bool) bool { return b != nil && !*b }
	if d := j.ConsecutiveFailures; d != nil {
		c.ConsecutiveFailures = ConsecutiveFailures{Disabled: off(d.Enabled), Threshold: d.Threshold}
	}
	if d := j.FailurePercentage; d != nil {
		c.FailurePercentage = FailurePercentage{off(d.Enabled), d.Threshold, d.MinimumHosts, d.RequestVolume}
	}
	if d := j.SuccessRate; d != nil {
		c.SuccessRate = SuccessRate{off(d.Enabled), d.StdevFactor, d.MinimumHosts, d.RequestVolume}
	}
	if d := j.SlowCalls; d != nil {
		c.SlowCalls = SlowCalls{Disabled: off(d.Enabled), RateThreshold: d.RateThreshold, RequestVolume: d.RequestVolume}
		if d.DurationThreshold != nil {
			c.SlowCalls.DurationThreshold = time.Duration(*d.DurationThreshold)
		}
	}
	for _, code := range j.FailureStatusCodes {
		c.FailureStatusCodes = append(c.FailureStatusCodes, codes.Code(code))
	}
	c.ChildPolicy = j.ChildPolicy
	c.Monitor = j.Monitor
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", Name, err)
	}
	return c, nil
}

// toJSON returns the balancer's JSON form of c with every default written
// out.
func toJSON(c Config) jsonConfig {
	c = c.withDefaults()
	en := func(disabled bool) *bool {
		if disabled {
			f := false
			return &f
		}
		return nil
	}
	dur := func(d time.Duration) *jsonDuration { v := jsonDuration(d); return &v }
	j := jsonConfig{
		Interval:           dur(c.Interval),
		BaseEjectionTime:   dur(c.BaseEjectionTime),
		MaxEjectionTime:    dur(c.MaxEjectionTime),
		MaxEjectionPercent: &c.MaxEjectionPercent,
		ChildPolicy:        c.ChildPolicy,
		Monitor:            c.Monitor,
	}
	j.ConsecutiveFailures = &struct {
		Enabled   *bool `json:"enabled,omitempty"`
		Threshold int   `json:"threshold,omitempty"`
	}{en(c.ConsecutiveFailures.Disabled), c.ConsecutiveFailures.Threshold}
	j.FailurePercentage = &struct {
		Enabled       *bool `json:"enabled,omitempty"`
		Threshold     int   `json:"threshold,omitempty"`
		MinimumHosts  int   `json:"minimumHosts,omitempty"`
		RequestVolume int   `json:"requestVolume,omitempty"`
	}{en(c.FailurePercentage.Disabled), c.FailurePercentage.Threshold, c.FailurePercentage.MinimumHosts, c.FailurePercentage.RequestVolume}
	j.SuccessRate = &struct {
		Enabled       *bool   `json:"enabled,omitempty"`
		StdevFactor   float64 `json:"stdevFactor,omitempty"`
		MinimumHosts  int     `json:"minimumHosts,omitempty"`
		RequestVolume int     `json:"requestVolume,omitempty"`
	}{en(c.SuccessRate.Disabled), c.SuccessRate.StdevFactor, c.SuccessRate.MinimumHosts, c.SuccessRate.RequestVolume}
	j.SlowCalls = &struct {
		Enabled           *bool         `json:"enabled,omitempty"`
		DurationThreshold *jsonDuration `json:"durationThreshold,omitempty"`
		RateThreshold     int           `json:"rateThreshold,omitempty"`
		RequestVolume     int           `json:"requestVolume,omitempty"`
	}{en(c.SlowCalls.Disabled), dur(c.SlowCalls.DurationThreshold), c.SlowCalls.RateThreshold, c.SlowCalls.RequestVolume}
	for _, code := range c.FailureStatusCodes {
		j.FailureStatusCodes = append(j.FailureStatusCodes, jsonCode(code))
	}
	return j
}

// MarshalJSON returns the balancer's JSON form of c, as it appears under
// "meshless_outlier" in a service config, with every default written out.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(toJSON(c)) }

// ServiceConfigJSON returns a complete gRPC service config that installs the
// balancer with cfg and, when healthCheckServiceName is not nil, gRPC's
// client-side health checking (grpc.health.v1 Watch) for that service name
// ("" is the server's overall health). Install it with
// grpc.WithDefaultServiceConfig. An invalid cfg is an error.
func ServiceConfigJSON(cfg Config, healthCheckServiceName *string) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", fmt.Errorf("%s: %w", Name, err)
	}
	type hc struct {
		ServiceName string `json:"serviceName"`
	}
	sc := struct {
		LB          []map[string]jsonConfig `json:"loadBalancingConfig"`
		HealthCheck *hc                     `json:"healthCheckConfig,omitempty"`
	}{LB: []map[string]jsonConfig{{Name: toJSON(cfg)}}}
	if healthCheckServiceName != nil {
		sc.HealthCheck = &hc{ServiceName: *healthCheckServiceName}
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("%s: %w", Name, err)
	}
	return string(b), nil
}
