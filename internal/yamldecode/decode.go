package yamldecode

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Schema is what a [Decoder] is told of the types it fills, beyond their
// yaml tags.
type Schema struct {
	// MaxValues is the most keys and values a document may hold, each alias
	// counted again at every place it is used.
	MaxValues int
	// Leaf decodes n into v when v's type is one of the schema's own value
	// types (a duration written as "100ms", a list of status codes), and
	// reports whether it did; handled is false for any other type, which
	// the Decoder decodes itself. n is counted already and not null; Leaf
	// reports problems with [Decoder.Fail], and counts the items of a list
	// with [Decoder.Count].
	Leaf func(d *Decoder, n *yaml.Node, path string, v reflect.Value) (handled, ok bool)
	// Section reports whether a value of type t is a section: the keys of
	// a section that could not be decoded are listed in [Decoder.Failed].
	// Sections are not looked for inside a section.
	Section func(t reflect.Type) bool
	// Decoded, when set, is called once the value of key, the field f of a
	// struct of type t (inline structs flattened), has been decoded; it may
	// rewrite f. It is not called for a section.
	Decoded func(t reflect.Type, key string, f reflect.Value)
}

// Decoder decodes YAML nodes into Go values, strictly, and keeps every
// problem it finds.
type Decoder struct {
	schema Schema
	// Problems are the problems found, in the order they were found.
	Problems []Problem
	// Failed lists, per section (by path, "defaults.retry"), the keys that
	// could not be decoded ("" for the whole section).
	Failed map[string][]string
	// Lines holds the line of each key decoded, by path.
	Lines map[string]int
	// values counts the keys and values decoded, aliases expanded.
	values int
	// section is the section being decoded ("defaults.retry"), or "".
	section string
}

// New returns a Decoder of schema s.
func New(s Schema) *Decoder {
	return &Decoder{schema: s, Failed: map[string][]string{}, Lines: map[string]int{}}
}

// Fail reports a problem with n, at path.
func (d *Decoder) Fail(n *yaml.Node, path, format string, args ...any) {
	d.Problems = append(d.Problems, Problem{Path: path, Line: n.Line, Message: fmt.Sprintf(format, args...)})
	if d.section == "" {
		return
	}
	key := strings.TrimPrefix(strings.TrimPrefix(path, d.section), ".")
	key, _, _ = strings.Cut(key, ".")
	key, _, _ = strings.Cut(key, "[")
	d.Failed[d.section] = append(d.Failed[d.section], key)
}

// Count counts one more value; false once the document holds too many.
func (d *Decoder) Count(n *yaml.Node, path string) bool {
	d.values++
	if d.values == d.schema.MaxValues+1 {
		d.Fail(n, path, "the document holds more than %d keys and values (aliases count each time they are used); this is where the limit was reached", d.schema.MaxValues)
	}
	return d.values <= d.schema.MaxValues
}

// Value decodes n into v, which is addressable, and reports whether it did:
// v is left as it was (unset) when n could not be decoded.
func (d *Decoder) Value(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !d.Count(n, path) {
		return false
	}
	return d.counted(n, path, v)
}

// counted is Value of a node already counted (a pointer's element is the
// pointer's value: counted once).
func (d *Decoder) counted(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true // an empty value: absent
	}
	if d.schema.Leaf != nil {
		if handled, ok := d.schema.Leaf(d, n, path, v); handled {
			return ok
		}
	}
	switch t := v.Type(); {
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		if !d.counted(n, path, e.Elem()) {
			return false
		}
		v.Set(e)
	case t.Kind() == reflect.Struct:
		return d.mapping(n, path, v)
	case t.Kind() == reflect.Map:
		return d.keyed(n, path, v)
	case t.Kind() == reflect.Int:
		var i int
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.Fail(n, path, "want an integer, got %s", Show(n))
			return false
		}
		v.SetInt(int64(i))
	case t.Kind() == reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.Fail(n, path, "want a number, got %s", Show(n))
			return false
		}
		v.SetFloat(f)
	case t.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.Fail(n, path, "want true or false, got %s", Show(n))
			return false
		}
		v.SetBool(b)
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.Fail(n, path, "want a string, got %s", Show(n))
			return false
		}
		v.SetString(n.Value)
	default:
		d.Fail(n, path, "cannot be set (%s)", t)
		return false
	}
	return true
}

// plainKey reports whether k is a key this decoder reads: not a YAML merge
// key (<<), which it does not expand, nor an alias, which would be read as
// its anchor's name; each is a problem.
func (d *Decoder) plainKey(k *yaml.Node, path string) bool {
	switch {
	case k.Tag == "!!merge" || k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0:
		d.Fail(k, path, "a YAML merge key (<<) is not supported: write the settings out, or put them at a level above, which this one inherits")
		return false
	case k.Kind == yaml.AliasNode:
		d.Fail(k, path, "an alias (*%s) is not supported as a key", k.Value)
		return false
	}
	return true
}

// mapping decodes a YAML mapping into a struct, refusing unknown keys.
func (d *Decoder) mapping(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		d.Fail(n, path, "want a mapping of keys to values, got %s", Show(n))
		return false
	}
	fields := Fields(v)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := Join(path, k.Value)
		if !d.Count(k, kp) {
			return true
		}
		if !d.plainKey(k, path) {
			continue
		}
		if seen[k.Value] {
			d.Fail(k, kp, "appears twice")
			continue
		}
		seen[k.Value] = true
		f, ok := fields[k.Value]
		if !ok {
			d.Fail(k, kp, "unknown key (known here: %s)", strings.Join(sortedKeys(fields), ", "))
			continue
		}
		d.Lines[kp] = k.Line
		if d.section == "" && d.schema.Section != nil && d.schema.Section(f.Type()) {
			d.section = kp
			d.Value(val, kp, f)
			d.section = ""
			continue
		}
		if d.Value(val, kp, f) && d.schema.Decoded != nil {
			d.schema.Decoded(v.Type(), k.Value, f)
		}
	}
	return true
}

// keyed decodes a YAML mapping into a map[string]*T.
func (d *Decoder) keyed(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		d.Fail(n, path, "want a mapping of names to settings, got %s", Show(n))
		return false
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := Join(path, k.Value)
		if !d.Count(k, kp) {
			return true
		}
		if !d.plainKey(k, path) {
			continue
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.Fail(k, path, "want a non-empty name as key, got %s", Show(k))
			continue
		}
		if v.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.Fail(k, kp, "appears twice")
			continue
		}
		d.Lines[kp] = k.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.Value(val, kp, e)
		if e.IsNil() { // `Charge:` with nothing under it
			e.Set(reflect.New(v.Type().Elem().Elem()))
		}
		v.SetMapIndex(reflect.ValueOf(k.Value), e)
	}
	return true
}

// Fields maps the YAML keys of struct v to its fields, inline structs
// flattened.
func Fields(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !t.Field(i).IsExported():
		case strings.Contains(opts, "inline"):
			for k, f := range Fields(v.Field(i)) {
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
