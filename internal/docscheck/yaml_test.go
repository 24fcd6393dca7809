package docscheck

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshless/meshless/grpcmw"
)

var topKeyRe = regexp.MustCompile(`(?m)^([A-Za-z]+):`)

// TestYAMLExamplesParse parses every ```yaml block of README.md and
// docs/*.md that is a meshless configuration — one whose top-level keys
// include one of grpcmw.Config's — with grpcmw.ParseConfig, which is strict:
// a misspelt key or a value out of range in an example fails here. A block
// meant to be wrong is marked <!-- fragment -->, as Go snippets are.
func TestYAMLExamplesParse(t *testing.T) {
	top := map[string]bool{}
	for _, k := range codeKeys() {
		if !strings.ContainsAny(k.path, ".") && k.path != "circuitBreaker" && k.path != "retry" && k.path != "bulkhead" && k.path != "timeout" {
			top[k.path] = true
		}
	}
	parsed := 0
	for _, doc := range docFiles(t) {
		for _, b := range blocks(readDoc(t, doc)) {
			if !b.fence || b.lang != "yaml" || isFragment(b.prev) {
				continue
			}
			meshless := false
			for _, m := range topKeyRe.FindAllStringSubmatch(b.text, -1) {
				meshless = meshless || top[m[1]]
			}
			if !meshless {
				continue // Prometheus, Kubernetes, Istio
			}
			parsed++
			if _, err := grpcmw.ParseConfig([]byte(b.text)); err != nil {
				t.Errorf("%s:%d: the YAML example is not a valid configuration (fix it, or mark it %s):\n%v", doc, b.line, fragmentMarker, err)
			}
		}
	}
	if parsed < 5 {
		t.Errorf("parsed only %d YAML examples: is the top-level key set (%v) right?", parsed, top)
	}
}
