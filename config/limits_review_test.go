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
// decoded into a pointer field was counted twice (the decoder's value, now
// internal/yamldecode's Value: it counted, then its pointer case called
// value again, which counted again).
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

// YAML merge keys and aliases used as keys are misread without
// an error: `<<: *x` under services, methods or hosts becomes an entry
// named "<<", and an alias used as a key is read as the key its anchor's
// *name* spells.
func TestMergeKeysAndAliasKeysAreRefused(t *testing.T) {
	for _, doc := range []string{
		"services:\n  a.Base: &base { retry: { maxAttempts: 5 } }\n  <<: *base\n",
		"services:\n  a.B:\n    methods:\n      Get: &m { retry: { maxAttempts: 5 } }\n      <<: *m\n",
		"hosts:\n  a.example: &h { retry: { maxAttempts: 5 } }\n  <<: *h\n",
		// The key is the mapping {enabled: true}, not "retry".
		"defaults: { circuitBreaker: &retry { enabled: true }, *retry : { maxAttempts: 5 } }\n",
	} {
		cfg, err := config.Parse([]byte(doc))
		if err == nil {
			out, _ := cfg.Marshal()
			t.Errorf("accepted:\n%s\nread as:\n%s", doc, out)
		}
	}
}

// These problems name the key but not the value (the brief:
// an error names the path and the value).
func TestErrorsShowTheValue(t *testing.T) {
	for _, c := range []struct{ doc, path, value string }{
		{"defaults: { bulkhead: { adaptive: { minLimit: -5 } } }", "defaults.bulkhead.adaptive.minLimit", "-5"},
		{"defaults: { bulkhead: { adaptive: { maxLimit: -5, minLimit: 1, initialLimit: 1 } } }", "defaults.bulkhead.adaptive.maxLimit", "-5"},
		{"defaults: { bulkhead: { adaptive: { initialLimit: 0 } } }", "defaults.bulkhead.adaptive.initialLimit", "0"},
		{"defaults: { deadLetter: { maxEntries: 0 } }", "defaults.deadLetter.maxEntries", "0"},
		{"defaults: { deadLetter: { maxBytes: 0 } }", "defaults.deadLetter.maxBytes", "0"},
		{"defaults: { deadLetter: { maxAge: 0s } }", "defaults.deadLetter.maxAge", "0s"},
		{"defaults: { deadLetter: { maxReplays: 0 } }", "defaults.deadLetter.maxReplays", "0"},
		{"defaults: { deadLetter: { replayRate: 0 } }", "defaults.deadLetter.replayRate", "0"},
		{"defaults: { deadLetter: { replayTimeout: 0s } }", "defaults.deadLetter.replayTimeout", "0s"},
	} {
		_, err := config.Parse([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: accepted", c.doc)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.path+":") || !strings.Contains(msg, "got "+c.value) {
			t.Errorf("%s: the error does not name %s and show %s: %v", c.doc, c.path, c.value, msg)
		}
	}
}

// Names that no gRPC service or method can have are refused, naming the
// entry: before, a tab pasted after a service's name, a dash in a method's,
// configured nothing without a word.
func TestInvalidServiceAndMethodNamesAreRefused(t *testing.T) {
	for _, doc := range []string{
		"services: { \"grpc.health.v1.Health\\t\": { timeout: { overall: 1s } } }",
		"services: { a.B: { methods: { \"Check-X\": { timeout: { overall: 1s } } } } }",
		"services: { a.B: { methods: { \"Get\\tCharge\": {} } } }",
		"services: { a.B: { methods: { \"9Lives\": {} } } }",
		"services: { \"a-b.C\": {} }",
		"services: { \"a..B\": {} }",
	} {
		if _, err := config.Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "services.") {
			t.Errorf("%s: %v, want an error naming the service or method", doc, err)
		}
	}
	for _, doc := range []string{
		"services: { grpc.health.v1.Health: { methods: { Check: {} } } }",
		"services: { a_b.C9: { methods: { _Get2: {} } } }",
	} {
		if _, err := config.Parse([]byte(doc)); err != nil {
			t.Errorf("%s: refused: %v", doc, err)
		}
	}
}
