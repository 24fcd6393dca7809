package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the benchmarks leave no goroutine behind (servers,
// connections, the coarse clock's ticker).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
