package docscheck

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/grpcmw"
)

// configDoc is the configuration reference the sync test holds to the code.
const configDoc = "docs/configuration.md"

// codeKey is one YAML key grpcmw's decoder reads, with the Go field behind it.
type codeKey struct {
	path  string // circuitBreaker.failureRateThreshold
	field string // config.CircuitBreakerSection.FailureRateThreshold
}

// codeKeys derives every YAML key from grpcmw.Config's structs by their yaml
// tags, as the decoder (internal/yamldecode, Fields) reads them: "-" and
// unexported fields skipped, inline structs flattened. A Policies value
// (defaults, a service, a method) starts over at the root, so a policy key is
// written once (circuitBreaker.enabled) however many levels may set it; a
// map's entries appear as <service>, <method>.
func codeKeys() []codeKey {
	var out []codeKey
	policies := reflect.TypeFor[config.Policies]()
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == policies && prefix != "" {
			return // walked from the root, once
		}
		switch t.Kind() {
		case reflect.Map:
			walk(t.Elem(), prefix)
			return
		case reflect.Struct:
		default:
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "-" || !f.IsExported():
			case strings.Contains(opts, "inline"):
				walk(f.Type, prefix)
			default:
				path := prefix + name
				out = append(out, codeKey{path: path, field: t.String() + "." + f.Name})
				next := path + "."
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Map {
					next += "<" + strings.TrimSuffix(name, "s") + ">."
				}
				walk(f.Type, next)
			}
		}
	}
	walk(reflect.TypeFor[grpcmw.Config](), "")
	walk(policies, "")
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

var keyCellRe = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// docKeys returns the keys the reference documents: the first cell of every
// row of a table whose header's first cell is "key", written in backticks.
func docKeys(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	inKeyTable := false
	for _, b := range blocks(readDoc(t, configDoc)) {
		line := strings.TrimSpace(b.text)
		switch {
		case b.fence || !strings.HasPrefix(line, "|"):
			inKeyTable = false
		case strings.HasPrefix(line, "| key |"):
			inKeyTable = true
		case inKeyTable:
			if m := keyCellRe.FindStringSubmatch(line); m != nil {
				if prev, dup := out[m[1]]; dup {
					t.Errorf("%s:%d: key `%s` is documented twice (also line %d)", configDoc, b.line, m[1], prev)
				}
				out[m[1]] = b.line
			}
		}
	}
	return out
}

// TestConfigurationReferenceInSync fails when a YAML key exists in grpcmw's
// configuration structs and not in docs/configuration.md, or the reverse.
func TestConfigurationReferenceInSync(t *testing.T) {
	keys := codeKeys()
	if len(keys) < 40 {
		t.Fatalf("derived only %d keys from grpcmw.Config: %v", len(keys), keys)
	}
	documented := docKeys(t)
	inCode := map[string]bool{}
	for _, k := range keys {
		inCode[k.path] = true
		if _, ok := documented[k.path]; !ok {
			t.Errorf("key `%s` (%s) is read by grpcmw's decoder but missing from %s: add a row starting | `%s` | to a table headed | key | … in that file",
				k.path, k.field, configDoc, k.path)
		}
	}
	for path, line := range documented {
		if !inCode[path] {
			t.Errorf("%s:%d documents key `%s`, which grpcmw's decoder does not read (no yaml tag of grpcmw.Config's structs gives that path): remove or rename the row", configDoc, line, path)
		}
	}
}

// TestCodeKeysSeeNesting pins the walk: nested sections, maps and the
// policy sections written once.
func TestCodeKeysSeeNesting(t *testing.T) {
	have := map[string]bool{}
	for _, k := range codeKeys() {
		have[k.path] = true
	}
	for _, want := range []string{"defaults", "services", "services.<service>.methods", "circuitBreaker.failureRateThreshold",
		"bulkhead.adaptive.minLimit", "outlierDetection.slowCalls.durationThreshold", "retryThrottling.maxTokens"} {
		if !have[want] {
			t.Errorf("codeKeys lacks %q", want)
		}
	}
	for _, not := range []string{"defaults.circuitBreaker", "services.<service>.circuitBreaker.enabled", "services.<service>.methods.<method>.retry"} {
		if have[not] {
			t.Errorf("codeKeys has %q: policy sections should be written once, from the root", not)
		}
	}
}
