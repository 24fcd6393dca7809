// Package e2e holds tests that run the project's programs and files against
// real outside tools: TestDashboardAndRulesAgainstPrometheus builds
// examples/chaos, runs a client that hedges beside it, scrapes both with a
// real Prometheus and runs every query of docs/grafana/meshless.json and
// docs/prometheus/meshless-rules.yml; TestRulesUnitTests runs promtool check
// rules and promtool test rules on the rules and their unit tests
// (docs/prometheus/meshless-rules.test.yml).
//
// They need /usr/bin/prometheus and /usr/bin/promtool (Debian's prometheus
// package: apt-get install prometheus). Without them the tests skip, unless
// the CI environment variable is set: then they fail.
//
// TestTransportsAgree and TestTransportsAgreeOnGeneratedScripts need
// nothing outside: they play one script of backend answers through grpcmw
// and through httpmw, configured from one YAML, in memory and on a
// testing/synctest bubble's clock, and compare what each caller, backend,
// breaker and metric saw (transports_test.go).
package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
