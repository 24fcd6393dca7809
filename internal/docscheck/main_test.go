package docscheck

import (
	"testing"

	"go.uber.org/goleak"
)

// The snippet test runs go vet as a subprocess; nothing may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
