package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/meshless/meshless/circuitbreaker"
)

// Limits on a configuration document. A document over a limit is refused
// with an error that names the limit; nothing is read past it.
const (
	// MaxConfigSize is the largest document ParseConfig and LoadConfig read,
	// in bytes (1 MiB).
	MaxConfigSize = 1 << 20
	// MaxConfigValues is the most keys and values a document may hold, each
	// alias counted again at every place it is used, so that a few anchors
	// cannot expand a small file into millions of values.
	MaxConfigValues = 10000
	// MaxConfigProblems is the most problems an error lists; the rest are
	// counted ("and 7 more problems").
	MaxConfigProblems = 20
)

// rootPath names the whole document in a [PathError].
const rootPath = "(root)"

// Parse parses a YAML (or JSON) configuration strictly: an unknown key, a
// wrong type or an out-of-range value is an error that names its path, such
// as
//
//	services."payment.PaymentService".circuitBreaker.failureRateThreshold: must be in (0, 100], got 150
//
// Every problem found is reported, in an [*Error], up to
// [MaxConfigProblems]. Nothing is dropped or clamped. checks are a
// transport's own checks (grpcmw's of service names against the protobuf
// descriptors linked into the program); their problems carry the line of
// the key they name.
func Parse(data []byte, checks ...Check) (*Config, error) {
	if len(data) > MaxConfigSize {
		return nil, configError(tooLarge(strconv.Itoa(len(data))))
	}
	root, err := parseYAML(data)
	if err != nil {
		return nil, configError(err)
	}
	cfg := new(Config)
	d := &decoder{failed: map[string][]string{}, lines: map[string]int{}}
	d.document(root, reflect.ValueOf(cfg).Elem())
	// What could not be read is left unset (inherited), so validation of the
	// rest still finds every other problem; what depends on it is not
	// reported a second time.
	errs := d.errs
	if err := cfg.validate(d.failed, d.lines, checks); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	if len(errs) > 0 {
		return nil, configError(errs...)
	}
	return cfg, nil
}

// A Check is a transport's own check of a configuration, run first when the
// configuration is validated. It reports each problem with report, naming
// the problem's path (services."a.B".methods.Get) as [PathError] does.
type Check func(c *Config, report func(path, problem string))

// Error is an invalid configuration: the problems found, each an error that
// names its path (a [*PathError] for most), at most [MaxConfigProblems] of
// them and a last one that counts the rest.
type Error struct {
	Problems []error
}

// Error returns the problems, one per line.
func (e *Error) Error() string { return errors.Join(e.Problems...).Error() }

// Unwrap returns the problems.
func (e *Error) Unwrap() []error { return e.Problems }

// configError returns the problems errs, at most MaxConfigProblems of them.
func configError(errs ...error) error {
	if n := len(errs) - MaxConfigProblems; n > 0 {
		errs = append(errs[:MaxConfigProblems:MaxConfigProblems], fmt.Errorf("and %d more problems", n))
	}
	return &Error{Problems: errs}
}

func tooLarge(size string) error {
	return &PathError{Path: rootPath, Problem: fmt.Sprintf("the document is %s bytes; the limit is %d bytes (1 MiB)", size, MaxConfigSize)}
}

// parseYAML reads the one document of data; nil when there is none.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(data, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &root, nil
	case err != nil:
		return nil, syntaxError(data, err)
	}
	return nil, &PathError{Path: rootPath, Line: next.Line, Problem: "a second document starts here (after ---); a configuration is one document"}
}

// PathError is a problem with one value of a configuration. Path is where it
// is, e.g. services."payment.PaymentService".retry.maxAttempts, or (root)
// for the whole document.
type PathError struct {
	Path    string
	Line    int // 0 when the config was built in Go
	Problem string
	// in names the level where the problem arises when Path is a key it
	// inherits (set in defaults, met by a service's own key): the key to
	// change may be either.
	in string
}

func (e *PathError) Error() string {
	msg := e.Path + ": " + e.Problem
	if e.in != "" {
		msg += "; " + e.in + " inherits it"
	}
	if e.Line > 0 {
		msg += " (line " + strconv.Itoa(e.Line) + ")"
	}
	return msg
}

type decoder struct {
	errs []error
	// values counts the keys and values decoded, aliases expanded.
	values int
	// section is the section being decoded ("defaults.retry"), or "".
	section string
	// failed lists, per section, the keys that could not be decoded ("" for
	// the whole section), so validation does not report them again.
	failed map[string][]string
	// lines holds the line of each key decoded, by path.
	lines map[string]int
	// http is set while the hosts section is decoded: its status codes are
	// HTTP status numbers.
	http bool
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &PathError{Path: path, Line: n.Line, Problem: fmt.Sprintf(format, args...)})
	if d.section == "" {
		return
	}
	key := strings.TrimPrefix(strings.TrimPrefix(path, d.section), ".")
	key, _, _ = strings.Cut(key, ".")
	key, _, _ = strings.Cut(key, "[")
	d.failed[d.section] = append(d.failed[d.section], key)
}

// count counts one more value; false once the document holds too many.
func (d *decoder) count(n *yaml.Node, path string) bool {
	d.values++
	if d.values == MaxConfigValues+1 {
		d.fail(n, path, "the document holds more than %d keys and values (aliases count each time they are used); this is where the limit was reached", MaxConfigValues)
	}
	return d.values <= MaxConfigValues
}

// document decodes the root node into the Config v.
func (d *decoder) document(root *yaml.Node, v reflect.Value) {
	if root == nil || len(root.Content) == 0 {
		return
	}
	n := root.Content[0]
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, rootPath, "the document must be a mapping (defaults, services, …), got %s", show(n))
		return
	}
	d.value(n, "", v)
}

var (
	durationType = reflect.TypeFor[Duration]()
	codesType    = reflect.TypeFor[Codes]()
	namesType    = reflect.TypeFor[Names]()
	breakerType  = reflect.TypeFor[CircuitBreakerSection]()
	policiesType = reflect.TypeFor[Policies]()
	// sectionTypes are the sections validation checks as a whole.
	sectionTypes = map[reflect.Type]bool{
		reflect.TypeFor[*CircuitBreakerSection]():     true,
		reflect.TypeFor[*RetrySection]():              true,
		reflect.TypeFor[*BulkheadSection]():           true,
		reflect.TypeFor[*TimeoutSection]():            true,
		reflect.TypeFor[*RetryThrottlingSection]():    true,
		reflect.TypeFor[*AdaptiveThrottlingSection](): true,
		reflect.TypeFor[*RateLimiterSection]():        true,
		reflect.TypeFor[*HedgingSection]():            true,
		reflect.TypeFor[*DeadLetterSection]():         true,
	}
)

// value decodes n into v, which is addressable, and reports whether it did:
// v is left as it was (unset) when n could not be decoded.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !d.count(n, path) {
		return false
	}
	return d.counted(n, path, v)
}

// counted is value of a node already counted (a pointer's element is the
// pointer's value: counted once).
func (d *decoder) counted(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true // an empty value: absent
	}
	switch t := v.Type(); {
	case t == durationType:
		return d.duration(n, path, v)
	case t == codesType:
		return d.codes(n, path, v)
	case t == namesType:
		return d.names(n, path, v)
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
			d.fail(n, path, "want an integer, got %s", show(n))
			return false
		}
		v.SetInt(int64(i))
	case t.Kind() == reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.fail(n, path, "want a number, got %s", show(n))
			return false
		}
		v.SetFloat(f)
	case t.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "want true or false, got %s", show(n))
			return false
		}
		v.SetBool(b)
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.fail(n, path, "want a string, got %s", show(n))
			return false
		}
		v.SetString(n.Value)
	default:
		d.fail(n, path, "cannot be set (%s)", t)
		return false
	}
	return true
}

// plainKey reports whether k is a key this schema reads: not a YAML merge
// key (<<), which it does not expand, nor an alias, which would be read as
// its anchor's name; each is an error.
func (d *decoder) plainKey(k *yaml.Node, path string) bool {
	switch {
	case k.Tag == "!!merge" || k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Style == 0:
		d.fail(k, path, "a YAML merge key (<<) is not supported: write the settings out, or put them at a level above, which this one inherits")
		return false
	case k.Kind == yaml.AliasNode:
		d.fail(k, path, "an alias (*%s) is not supported as a key", k.Value)
		return false
	}
	return true
}

// mapping decodes a YAML mapping into a struct, refusing unknown keys.
func (d *decoder) mapping(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of keys to values, got %s", show(n))
		return false
	}
	fields := fieldsOf(v)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := Join(path, k.Value)
		if !d.count(k, kp) {
			return true
		}
		if !d.plainKey(k, path) {
			continue
		}
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
		d.lines[kp] = k.Line
		if d.section == "" && sectionTypes[f.Type()] {
			d.section = kp
			d.value(val, kp, f)
			d.section = ""
			continue
		}
		d.http = d.http || (path == "" && k.Value == "hosts")
		ok = d.value(val, kp, f)
		if path == "" {
			d.http = false
		}
		if ok && (v.Type() == breakerType || v.Type() == policiesType) {
			key := k.Value
			if v.Type() == policiesType {
				key = "policies." + key
			}
			canonicalEnum(key, f)
		}
	}
	return true
}

// canonicalEnum rewrites a value that names one of a few choices (a
// circuitBreaker key, or a level's mode as "policies.mode"), written in any
// case, to its canonical spelling, so that Marshal writes it so.
func canonicalEnum(key string, f reflect.Value) {
	if f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
		return
	}
	s := f.Elem().String()
	switch key {
	case "keyBy", "policies.mode":
		for _, c := range []string{KeyByService, KeyByMethod, ModeEnforce, ModeObserve} {
			if strings.EqualFold(s, c) {
				s = c
			}
		}
	case "slidingWindowType":
		if wt, err := circuitbreaker.ParseWindowType(s); err == nil {
			s = wt.String()
		}
	case "mode":
		if m, err := circuitbreaker.ParseMode(s); err == nil {
			s = m.String()
		}
	}
	f.Elem().SetString(s)
}

// keyed decodes a YAML mapping into a map[string]*T.
func (d *decoder) keyed(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of names to settings, got %s", show(n))
		return false
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := Join(path, k.Value)
		if !d.count(k, kp) {
			return true
		}
		if !d.plainKey(k, path) {
			continue
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.fail(k, path, "want a non-empty name as key, got %s", show(k))
			continue
		}
		if v.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.fail(k, kp, "appears twice")
			continue
		}
		d.lines[kp] = k.Line
		e := reflect.New(v.Type().Elem()).Elem()
		d.value(val, kp, e)
		if e.IsNil() { // `Charge:` with nothing under it
			e.Set(reflect.New(v.Type().Elem().Elem()))
		}
		v.SetMapIndex(reflect.ValueOf(k.Value), e)
	}
	return true
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.fail(n, path, "want a duration such as 100ms or 2s, got %s", show(n))
		return false
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "want a duration such as 100ms or 2s, got %q", Clip(n.Value))
		return false
	}
	v.SetInt(int64(dur))
	return true
}

// codes decodes a list of status codes; a list with a code that cannot be
// read is left unset.
func (d *decoder) codes(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list of status codes such as [UNAVAILABLE], got %s", show(n))
		return false
	}
	cs := make(Codes, 0, len(n.Content))
	ok := true
	for i, e := range n.Content {
		ep := path + "[" + strconv.Itoa(i) + "]"
		if !d.count(e, ep) {
			return false
		}
		parse, want := parseCode, "a gRPC code name such as UNAVAILABLE, or a number 0-16"
		if d.http {
			parse, want = parseHTTPCode, "an HTTP status number 100-599 under hosts"
		}
		c, known := parse(e.Value)
		if e.Kind != yaml.ScalarNode || !known {
			d.fail(e, ep, "unknown status code %s (%s)", show(e), want)
			ok = false
			continue
		}
		cs = append(cs, c)
	}
	if ok {
		v.Set(reflect.ValueOf(cs))
	}
	return ok
}

// names decodes a list of strings; a list with an item that is not a
// string is left unset.
func (d *decoder) names(n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list such as [x-request-id], got %s", show(n))
		return false
	}
	ns := make(Names, 0, len(n.Content))
	ok := true
	for i, e := range n.Content {
		ep := path + "[" + strconv.Itoa(i) + "]"
		if !d.count(e, ep) {
			return false
		}
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			d.fail(e, ep, "want a string, got %s", show(e))
			ok = false
			continue
		}
		ns = append(ns, e.Value)
	}
	if ok {
		v.Set(reflect.ValueOf(ns))
	}
	return ok
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

// Join appends key to a configuration path, as [PathError] paths are
// written: keys that are not plain words (service names have dots) are
// quoted, and long keys clipped.
func Join(path, key string) string {
	key = Clip(key)
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
			return strconv.Quote(Clip(n.Value))
		}
		return Clip(n.Value)
	}
	return "nothing"
}

// maxShown is how many runes of a key or value a message shows.
const maxShown = 64

// Clip shortens s, a key or value for a message, to 64 runes, marking the
// cut with "…".
func Clip(s string) string {
	r := 0
	for i := range s {
		if r == maxShown {
			return s[:i] + "…"
		}
		r++
	}
	return s
}

// Marshal returns the configuration as YAML that [Parse] reads back to the
// same configuration.
func (c *Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }
