package apicount

import (
	"bufio"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the main module's directory, from this package's.
const root = "../.."

// The table's heading in docs/architecture.md.
const heading = "## The public API, counted"

// skipped are the top-level directories that hold no public package of the
// main module.
var skipped = map[string]bool{"internal": true, "examples": true, "bench": true, "e2e": true,
	"cmd": true, "dashboard": true, "docs": true, "testdata": true}

// count returns the exported names of the package in dir, or ok false when
// dir holds no importable package: its functions, constants, variables and
// types, and each type's methods, constructors, constants and variables (as
// go doc lists them). Test files do not count.
func count(t *testing.T, dir string) (n int, ok bool) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	for name, p := range pkgs {
		if name == "main" || strings.HasSuffix(name, "_test") {
			continue
		}
		if ok {
			t.Fatalf("%s: more than one package", dir)
		}
		ok = true
		d := doc.New(p, dir, 0)
		n += len(d.Funcs)
		for _, v := range append(d.Consts, d.Vars...) {
			n += len(v.Names)
		}
		for _, ty := range d.Types {
			n += 1 + len(ty.Funcs) + len(ty.Methods)
			for _, v := range append(ty.Consts, ty.Vars...) {
				n += len(v.Names)
			}
		}
	}
	return n, ok
}

// counts returns the count of every public package of the main module, by
// import path relative to the module ("circuitbreaker", "grpcmw/outlier").
func counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		first, _, _ := strings.Cut(rel, "/")
		base := filepath.Base(path)
		if skipped[first] || base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			return filepath.SkipDir // a nested module
		}
		if n, ok := count(t, path); ok {
			out[rel] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// row is one line of the table: | `pkg` | before | after | why |
var row = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*([0-9]+|—)\\s*\\|\\s*([0-9]+)\\s*\\|(.*)\\|\\s*$")

// table reads the table's "after" column, by package.
func table(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && strings.HasPrefix(line, "| `"):
			m := row.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("docs/architecture.md: a row of the table does not read | `package` | before | after | why |: %q", line)
			}
			if strings.TrimSpace(m[4]) == "" {
				t.Errorf("docs/architecture.md: the row of %s does not say what changed and why", m[1])
			}
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/architecture.md: %s has two rows", m[1])
			}
			out[m[1]], _ = strconv.Atoi(m[3])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("docs/architecture.md has no table under %q", heading)
	}
	return out
}

func TestTheTableOfThePublicAPIIsTrue(t *testing.T) {
	got, want := counts(t), table(t)
	var names []string
	for p := range got {
		names = append(names, p)
	}
	for p := range want {
		if _, ok := got[p]; !ok {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		n, counted := got[p]
		w, listed := want[p]
		switch {
		case !listed:
			t.Errorf("package %s (%d exported names) has no row in docs/architecture.md's table", p, n)
		case !counted:
			t.Errorf("docs/architecture.md's table lists %s, which is no public package of the module", p)
		case n != w:
			t.Errorf("package %s has %d exported names; docs/architecture.md's table says %d", p, n, w)
		}
	}
}

// The counter counts what go doc lists: a package of known shape.
func TestCountCountsWhatGoDocLists(t *testing.T) {
	dir := t.TempDir()
	src := `package p

// T is a type.
type T struct{}

// NewT is T's constructor.
func NewT() *T { return nil }

// M is a method.
func (*T) M() {}

func (*T) m() {}

type u struct{}

// U is u's method, which go doc does not list.
func (u) U() {}

// C and D are constants; E is a variable.
const C, D = 1, 2

var E = 3

// Kind is an enum with its constants.
type Kind int

const (
	K1 Kind = iota
	K2
)

// F is a function.
func F() {}

func f() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc Exported() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// T, NewT, T.M, C, D, E, Kind, K1, K2, F.
	if n, ok := count(t, dir); !ok || n != 10 {
		t.Fatalf("count = %d, %v; want 10, true", n, ok)
	}
}
