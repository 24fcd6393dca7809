package config_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
)

// A syntax error after many list items makes Parse quadratic in
// the document's lines (internal/yamlscan.Scan): 20 kB take seconds and
// gigabytes; a 200 kB document (well under the 1 MiB limit) does not end.
func TestASyntaxErrorAfterManyListItemsIsFound(t *testing.T) {
	for name, doc := range map[string]string{
		"top-level items": strings.Repeat("-\n", 10_000) + "\"x\n",
		"nested items":    "services:\n" + strings.Repeat("  -\n", 5_000) + "\"x\n",
	} {
		t.Run(name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			start := time.Now()
			_, err := config.Parse([]byte(doc))
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			if err == nil {
				t.Fatal("accepted")
			}
			if alloc := (m1.TotalAlloc - m0.TotalAlloc) >> 20; alloc > 64 || took > time.Second {
				t.Fatalf("a %d-byte document with a syntax error took %v and allocated %d MiB: %v", len(doc), took, alloc, err)
			}
		})
	}
}

// docs/configuration.md: "A document is at most 1 MiB and 10,000
// keys and values". 4,000 services written `name: {}` are 8,002 keys and
// values, yet the limit is reported reached at the 3,333rd: every value
// decoded into a pointer field is counted twice (decode.go value: count,
// then the pointer case calls value again, which counts again).
func TestTheValueLimitCountsEachValueOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range 4000 {
		fmt.Fprintf(&b, "  s.S%d: {}\n", i)
	}
	if _, err := config.Parse([]byte(b.String())); err != nil {
		t.Fatalf("8,002 keys and values (limit %d) refused: %.300v", config.MaxConfigValues, err)
	}
}
