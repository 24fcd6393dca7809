package grpcmw

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ParseConfig parses a YAML (or JSON) configuration strictly: an unknown
// key, a wrong type or an out-of-range value is an error that names its path,
// such as
//
//	services."payment.PaymentService".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150
//
// Every problem found is reported, joined. Nothing is dropped or clamped.
func ParseConfig(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("grpcmw: config: %w", err)
	}
	cfg := new(Config)
	d := new(decoder)
	if len(root.Content) > 0 {
		d.value(root.Content[0], "", reflect.ValueOf(cfg).Elem())
	}
	// What could not be read is left unset (inherited), so validation of the
	// rest still finds every other problem.
	errs := d.errs
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("grpcmw: config: %w", err)
	}
	return cfg, nil
}

// PathError is a problem with one value of a configuration. Path is where it
// is, e.g. services."payment.PaymentService".retry.maxAttempts.
type PathError struct {
	Path    string
	Line    int // 0 when the config was built in Go
	Problem string
}

func (e *PathError) Error() string {
	if e.Line > 0 {
		return e.Path + ": " + e.Problem + " (line " + strconv.Itoa(e.Line) + ")"
	}
	return e.Path + ": " + e.Problem
}

type decoder struct{ errs []error }

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &PathError{Path: path, Line: n.Line, Problem: fmt.Sprintf(format, args...)})
}

var (
	durationType = reflect.TypeFor[Duration]()
	codesType    = reflect.TypeFor[Codes]()
)

// value decodes n into v, which is addressable.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value: absent
	}
	switch t := v.Type(); {
	case t == durationType:
		d.duration(n, path, v)
	case t == codesType:
		d.codes(n, path, v)
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		d.value(n, path, e.Elem())
		v.Set(e)
	case t.Kind() == reflect.Struct:
		d.mapping(n, path, v)
	case t.Kind() == reflect.Map:
		d.keyed(n, path, v)
	case t.Kind() == reflect.Int:
		var i int
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.fail(n, path, "want an integer, got %s", show(n))
			return
		}
		v.SetInt(int64(i))
	case t.Kind() == reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.fail(n, path, "want a number, got %s", show(n))
			return
		}
		v.SetFloat(f)
	case t.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "want true or false, got %s", show(n))
			return
		}
		v.SetBool(b)
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.fail(n, path, "want a string, got %s", show(n))
			return
		}
		v.SetString(n.Value)
	default:
		d.fail(n, path, "cannot be set (%s)", t)
	}
}

// mapping decodes a YAML mapping into a struct, refusing unknown keys.
func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of keys to values, got %s", show(n))
		return
	}
	fields := fieldsOf(v)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := join(path, k.Value)
		if seen[k.Value] {
			d.fail(k, kp, "appears twice")
			continue
		}
		seen[k.Value] = true
		f, ok := fields[k.Value]
		if !ok {
			d.fail(k, kp, "unknown key (known here: %s)", strings.Join(sortedKeys(fields), ", "))
			continue
		}
		d.value(val, kp, f)
	}
}

// keyed decodes a YAML mapping into a map[string]*T.
func (d *decoder) keyed(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of names to settings, got %s", show(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := join(path, k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.fail(k, path, "want a non-empty name as key, got %s", show(k))
			continue
		}
		if v.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.fail(k, kp, "appears twice")
			continue
		}
		e := reflect.New(v.Type().Elem()).Elem()
		d.value(val, kp, e)
		if e.IsNil() { // `Charge:` with nothing under it
			e.Set(reflect.New(v.Type().Elem().Elem()))
		}
		v.SetMapIndex(reflect.ValueOf(k.Value), e)
	}
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.fail(n, path, "want a duration such as 100ms or 2s, got %s", show(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "want a duration such as 100ms or 2s, got %q", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) codes(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list of status codes such as [UNAVAILABLE], got %s", show(n))
		return
	}
	cs := make(Codes, 0, len(n.Content))
	for i, e := range n.Content {
		c, ok := parseCode(e.Value)
		if e.Kind != yaml.ScalarNode || !ok {
			d.fail(e, path+"["+strconv.Itoa(i)+"]", "unknown status code %s (a gRPC code name such as UNAVAILABLE, or a number 0-16)", show(e))
			continue
		}
		cs = append(cs, c)
	}
	v.Set(reflect.ValueOf(cs))
}

// fieldsOf maps the YAML keys of struct v to its fields, inline structs
// flattened.
func fieldsOf(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !t.Field(i).IsExported():
		case strings.Contains(opts, "inline"):
			for k, f := range fieldsOf(v.Field(i)) {
				out[k] = f
			}
		default:
			out[name] = v.Field(i)
		}
	}
	return out
}

func sortedKeys(m map[string]reflect.Value) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// join appends key to a path, quoting keys that are not plain words
// (service names have dots).
func join(path, key string) string {
	if !plain(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// show describes a node for an error message.
func show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "nothing"
}

// Marshal returns the configuration as YAML that [ParseConfig] reads back
// to the same configuration.
func (c *Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }
