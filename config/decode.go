package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/yamldecode"
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
	errs, failed, lines := decode(root, cfg)
	// What could not be read is left unset (inherited), so validation of the
	// rest still finds every other problem; what depends on it is not
	// reported a second time.
	if err := cfg.validate(failed, lines, checks); err != nil {
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

// parseYAML reads the one document of data (internal/yamldecode); nil when
// there is none.
func parseYAML(data []byte) (*yaml.Node, error) {
	root, p := yamldecode.Read(data)
	if p != nil {
		return nil, &PathError{Path: orRoot(p.Path), Line: p.Line, Problem: p.Message}
	}
	return root, nil
}

// orRoot writes the root's path for an empty one.
func orRoot(path string) string {
	if path == "" {
		return rootPath
	}
	return path
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

// The decoding itself is internal/yamldecode's, strict and with every
// problem's path and line; what follows is this schema's part of it: its
// own value types, its sections and the choices it writes canonically.

// schema is the configuration's, for internal/yamldecode.
var schema = yamldecode.Schema{
	MaxValues: MaxConfigValues,
	Leaf:      leaf,
	Section:   func(t reflect.Type) bool { return sectionTypes[t] },
	Decoded:   decoded,
}

// decode decodes the document root into cfg and returns the problems found
// (each a *PathError), the keys of each section that could not be decoded,
// and the line of each key, by path.
func decode(root *yaml.Node, cfg *Config) (errs []error, failed map[string][]string, lines map[string]int) {
	d := yamldecode.New(schema)
	document(d, root, reflect.ValueOf(cfg).Elem())
	for _, p := range d.Problems {
		errs = append(errs, &PathError{Path: p.Path, Line: p.Line, Problem: p.Message})
	}
	return errs, d.Failed, d.Lines
}

// document decodes the root node into the Config v.
func document(d *yamldecode.Decoder, root *yaml.Node, v reflect.Value) {
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
		d.Fail(n, rootPath, "the document must be a mapping (defaults, services, …), got %s", yamldecode.Show(n))
		return
	}
	d.Value(n, "", v)
}

var (
	durationType = reflect.TypeFor[Duration]()
	codesType    = reflect.TypeFor[Codes]()
	namesType    = reflect.TypeFor[Names]()
	breakerType  = reflect.TypeFor[CircuitBreakerSection]()
	// policiesTypes are the levels: Policies, and Service and Host, which
	// write theirs inline.
	policiesTypes = map[reflect.Type]bool{
		reflect.TypeFor[Policies](): true,
		reflect.TypeFor[Service]():  true,
		reflect.TypeFor[Host]():     true,
	}
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

// leaf decodes the schema's own value types: durations, status codes and
// names.
func leaf(d *yamldecode.Decoder, n *yaml.Node, path string, v reflect.Value) (handled, ok bool) {
	switch v.Type() {
	case durationType:
		return true, duration(d, n, path, v)
	case codesType:
		return true, decodeCodes(d, n, path, v)
	case namesType:
		return true, names(d, n, path, v)
	}
	return false, false
}

// decoded writes a circuitBreaker key, or a level's mode, canonically.
func decoded(t reflect.Type, key string, f reflect.Value) {
	if t == breakerType || policiesTypes[t] {
		if policiesTypes[t] {
			key = "policies." + key
		}
		canonicalEnum(key, f)
	}
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

func duration(d *yamldecode.Decoder, n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int") {
		d.Fail(n, path, "want a duration such as 100ms or 2s, got %s", yamldecode.Show(n))
		return false
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.Fail(n, path, "want a duration such as 100ms or 2s, got %q", Clip(n.Value))
		return false
	}
	v.SetInt(int64(dur))
	return true
}

// decodeCodes decodes a list of status codes; a list with a code that
// cannot be read is left unset. Under hosts (HTTP's section) the codes are HTTP
// status numbers.
func decodeCodes(d *yamldecode.Decoder, n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.SequenceNode {
		d.Fail(n, path, "want a list of status codes such as [UNAVAILABLE], got %s", yamldecode.Show(n))
		return false
	}
	http := strings.HasPrefix(path, "hosts.")
	cs := make(Codes, 0, len(n.Content))
	ok := true
	for i, e := range n.Content {
		ep := path + "[" + strconv.Itoa(i) + "]"
		if !d.Count(e, ep) {
			return false
		}
		parse, want := parseCode, "a gRPC code name such as UNAVAILABLE, or a number 0-16"
		if http {
			parse, want = parseHTTPCode, "an HTTP status number 100-599 under hosts"
		}
		c, known := parse(e.Value)
		if e.Kind != yaml.ScalarNode || !known {
			d.Fail(e, ep, "unknown status code %s (%s)", yamldecode.Show(e), want)
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
func names(d *yamldecode.Decoder, n *yaml.Node, path string, v reflect.Value) bool {
	if n.Kind != yaml.SequenceNode {
		d.Fail(n, path, "want a list such as [x-request-id], got %s", yamldecode.Show(n))
		return false
	}
	ns := make(Names, 0, len(n.Content))
	ok := true
	for i, e := range n.Content {
		ep := path + "[" + strconv.Itoa(i) + "]"
		if !d.Count(e, ep) {
			return false
		}
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" {
			d.Fail(e, ep, "want a string, got %s", yamldecode.Show(e))
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

// Join appends key to a configuration path, as [PathError] paths are
// written: keys that are not plain words (service names have dots) are
// quoted, and long keys clipped.
func Join(path, key string) string { return yamldecode.Join(path, key) }

// Clip shortens s, a key or value for a message, to 64 runes, marking the
// cut with "…".
func Clip(s string) string { return yamldecode.Clip(s) }

// Marshal returns the configuration as YAML that [Parse] reads back to the
// same configuration.
func (c *Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }
