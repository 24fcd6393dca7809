package bulkhead

import (
	"github.com/meshless/meshless/resilience"
)

var (
	_ resilience.Policy = (*Bulkhead)(nil)
	_ resilience.Gate   = (*Bulkhead)(nil)
)
