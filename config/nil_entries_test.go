package config_test

import (
	"testing"

	"github.com/meshless/meshless/config"
)

// A service or host a Config built in Go writes with a nil entry is
// written, as YAML's "name:" (null) is, which decodes to an empty entry:
// the transports then give it entries of its own rather than the ones
// unknown names share.
func TestNilEntriesAreWritten(t *testing.T) {
	goCfg := &config.Config{
		Services: map[string]*config.Service{"a.B": nil},
		Hosts:    map[string]*config.Host{"api.example": nil},
	}
	yamlCfg, err := config.Parse([]byte("services:\n  a.B:\nhosts:\n  api.example:\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*config.Config{"Go": goCfg, "YAML": yamlCfg} {
		if !c.HasGroup(config.GRPC, "a.B") || !c.HasGroup(config.HTTP, "api.example") {
			t.Errorf("%s: HasGroup(a.B) %v, HasGroup(api.example) %v; want both", name,
				c.HasGroup(config.GRPC, "a.B"), c.HasGroup(config.HTTP, "api.example"))
		}
		if c.HasGroup(config.GRPC, "c.D") || c.HasGroup(config.HTTP, "other.example") {
			t.Errorf("%s: a group the configuration does not write is reported written", name)
		}
	}
}
