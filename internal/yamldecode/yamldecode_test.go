package yamldecode_test

import (
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/meshless/meshless/internal/yamldecode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upper is a schema's own value type: a word, read in upper case.
type upper string

type section struct {
	Size *int   `yaml:"size,omitempty"`
	Name *upper `yaml:"name,omitempty"`
}

type Inner struct {
	Mode *string `yaml:"mode,omitempty"`
}

type doc struct {
	Inner `yaml:",inline"`
	Sec   *section            `yaml:"sec,omitempty"`
	Items map[string]*section `yaml:"items,omitempty"`
	Off   bool                `yaml:"-"`
}

var upperType = reflect.TypeFor[upper]()

func schema(max int, decoded *[]string) yamldecode.Schema {
	return yamldecode.Schema{
		MaxValues: max,
		Leaf: func(d *yamldecode.Decoder, n *yaml.Node, path string, v reflect.Value) (bool, bool) {
			if v.Type() != upperType {
				return false, false
			}
			if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
				d.Fail(n, path, "want a word, got %s", yamldecode.Show(n))
				return true, false
			}
			v.SetString(strings.ToUpper(n.Value))
			return true, true
		},
		Section: func(t reflect.Type) bool { return t == reflect.TypeFor[*section]() },
		Decoded: func(t reflect.Type, key string, f reflect.Value) {
			*decoded = append(*decoded, t.Name()+"."+key)
		},
	}
}

func decode(t *testing.T, max int, src string) (*yamldecode.Decoder, doc, []string) {
	t.Helper()
	root, p := yamldecode.Read([]byte(src))
	if p != nil {
		t.Fatalf("Read: %+v", *p)
	}
	var decoded []string
	d := yamldecode.New(schema(max, &decoded))
	var out doc
	d.Value(root.Content[0], "", reflect.ValueOf(&out).Elem())
	return d, out, decoded
}

func TestEveryProblemHasItsPathAndLine(t *testing.T) {
	d, out, decoded := decode(t, 100, `mode: fast
sec: { size: x, name: [1] }
items:
  a.b: { size: 2, name: ok }
  c: ~
mode: slow
nope: 1
<<: { mode: x }
`)
	want := []yamldecode.Problem{
		{Path: "sec.size", Line: 2, Message: `want an integer, got "x"`},
		{Path: "sec.name", Line: 2, Message: "want a word, got a list"},
		{Path: "mode", Line: 6, Message: "appears twice"},
		{Path: "nope", Line: 7, Message: "unknown key (known here: items, mode, sec)"},
		{Path: "", Line: 8, Message: "a YAML merge key (<<) is not supported: write the settings out, or put them at a level above, which this one inherits"},
	}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("problems\n%+v\nwant\n%+v", d.Problems, want)
	}
	if got := d.Failed["sec"]; !reflect.DeepEqual(got, []string{"size", "name"}) {
		t.Errorf("Failed[sec] = %q, want [size name]", got)
	}
	if got := d.Lines[`items."a.b"`]; got != 4 {
		t.Errorf(`Lines[items."a.b"] = %d, want 4`, got)
	}
	if a := out.Items["a.b"]; *out.Mode != "fast" || a == nil || *a.Size != 2 || *a.Name != "OK" || out.Items["c"] == nil || out.Sec == nil {
		t.Errorf("decoded %+v", out)
	}
	// Decoded is told of each field decoded, by its struct's type, and
	// never of a section.
	if w := []string{"doc.mode", "section.size", "section.name", "doc.items"}; !reflect.DeepEqual(decoded, w) {
		t.Errorf("Decoded saw %q, want %q", decoded, w)
	}
}

func TestAliasesCountWhereTheyAreUsed(t *testing.T) {
	d, _, _ := decode(t, 12, "items:\n  a: &s { size: 1, name: x }\n  b: *s\n  c: *s\n")
	// The root, items, a, its mapping, size, 1, name, x, b, its mapping
	// again (the alias), size, and its 1 is the 13th value.
	want := []yamldecode.Problem{{Path: "items.b.size", Line: 2, Message: "the document holds more than 12 keys and values (aliases count each time they are used); this is where the limit was reached"}}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("problems\n%+v\nwant\n%+v", d.Problems, want)
	}
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want *yamldecode.Problem
	}{
		{"", nil},
		{"a: 1\n---\nb: 2\n", &yamldecode.Problem{Line: 2, Message: "a second document starts here (after ---); a configuration is one document"}},
		{"a:\n\tb: 1\n", &yamldecode.Problem{Path: "a.b", Line: 2, Message: "indentation uses a tab; YAML needs spaces"}},
		{"a:\n  b: 1\n c: 2\n", &yamldecode.Problem{Path: "a.c", Line: 3, Message: `"c" is indented 1 spaces, which lines up with no key above it (they are indented 0, 2); mind the indentation`}},
		{"a: [1\n", &yamldecode.Problem{Path: "a", Line: 1, Message: "not valid YAML: did not find expected ',' or ']'"}},
	} {
		_, got := yamldecode.Read([]byte(tc.src))
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Read(%q) = %+v, want %+v", tc.src, got, tc.want)
		}
	}
}

func TestJoinAndClip(t *testing.T) {
	long := strings.Repeat("é", 70)
	for _, tc := range []struct{ got, want string }{
		{yamldecode.Join("", "services"), "services"},
		{yamldecode.Join("services", "a.B"), `services."a.B"`},
		{yamldecode.Join("a", ""), `a.""`},
		{yamldecode.Clip(long), strings.Repeat("é", 64) + "…"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
