package docscheck

// Every ```go snippet of README.md and docs/*.md is compiled (type-checked
// and vetted with `go vet`) unless it is marked as a fragment: a line
//
//	<!-- fragment -->
//
// as the last non-blank line before its opening fence. Mark a snippet a
// fragment only when it cannot stand alone: an API listing, a part with "…"
// in place of code. A fragment cut from a program of the repository says so,
//
//	<!-- fragment: from examples/basic/main.go -->
//
// and TestFragmentsFromFiles checks that its lines appear, in order and
// together, in that file (indentation aside), which the build compiles. The
// same markers work on ```yaml blocks (see yaml_test.go). A file of one of
// getting-started.md's programs, marked <!-- program NAMES: FILE -->, is
// built with the program's other files by TestGettingStartedPrograms
// instead.
//
// A snippet is compiled in a package of its own, in a temporary directory
// examples/_docsnippets… (the examples module requires every module the docs
// use: grpc, OpenTelemetry's SDK, the Prometheus client; the "_" keeps the
// directory out of every ./... pattern), removed afterwards:
//
//   - a snippet with a package clause is a file, as it is;
//   - any other is wrapped: an import block it starts with is kept, and the
//     packages it names that are not imported are added from knownImports;
//     declarations (func, type, var, const) stay at the top level, and
//     statements become the body of a function that returns error, with
//     `_ = x` added for each variable they declare, so a short example need
//     not use all it builds. The names a short example takes for granted —
//     ctx, conn, client, req, cfg, chain, mp, … — are declared in ambient.go
//     (see ambientGo), with types that fit how the docs use them.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const fragmentMarker = "<!-- fragment -->"

// knownImports are the import paths of the package names snippets use
// without importing them.
var knownImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log",
	"net": "net", "http": "net/http", "os": "os", "strings": "strings", "sync": "sync", "time": "time",
	"grpc": "google.golang.org/grpc", "codes": "google.golang.org/grpc/codes",
	"status": "google.golang.org/grpc/status", "insecure": "google.golang.org/grpc/credentials/insecure",
	"metadata":   "google.golang.org/grpc/metadata",
	"testgrpc":   "google.golang.org/grpc/interop/grpc_testing",
	"metric":     "go.opentelemetry.io/otel/metric",
	"sdkmetric":  "go.opentelemetry.io/otel/sdk/metric",
	"failsafe":   "github.com/failsafe-go/failsafe-go",
	"fallback":   "github.com/failsafe-go/failsafe-go/fallback",
	"resilience": "github.com/meshless/meshless/resilience", "circuitbreaker": "github.com/meshless/meshless/circuitbreaker",
	"retry": "github.com/meshless/meshless/retry", "bulkhead": "github.com/meshless/meshless/bulkhead",
	"timeout": "github.com/meshless/meshless/timeout", "ratelimiter": "github.com/meshless/meshless/ratelimiter",
	"grpcmw": "github.com/meshless/meshless/grpcmw", "outlier": "github.com/meshless/meshless/grpcmw/outlier",
	"otelmw": "github.com/meshless/meshless/otelmw", "failsafepolicy": "github.com/meshless/meshless/failsafepolicy",
	"config": "github.com/meshless/meshless/config",
}

// ambientGo declares, in every wrapped snippet's package, the names short
// examples take for granted.
const ambientGo = `package snippet

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

type request struct{}

// paymentClient stands for a generated client.
type paymentClient struct{}

func (paymentClient) Charge(context.Context, *request) error { return nil }

var (
	ctx         = context.Background()
	target      = "localhost:50051"
	creds       = grpc.WithTransportCredentials(insecure.NewCredentials())
	opts        []grpc.DialOption
	conn        *grpc.ClientConn
	client      paymentClient
	req         *request
	cfg         *grpcmw.Config
	chain       *grpcmw.Chain
	mp          metric.MeterProvider
	obs         *otelmw.Observer
	mux         = http.NewServeMux()
	impl        testgrpc.TestServiceServer
	cb, breaker *circuitbreaker.Breaker
	bh          *bulkhead.Bulkhead
	rl          *ratelimiter.Limiter
	retryPolicy *retry.Retry
	overall     *timeout.Timeout
	perAttempt  *timeout.Timeout
	listener    outlierListener
	call        = func(context.Context) error { return nil }
	charge      = call
	callBackend = call
	getItem     = call
	retries     *retry.Retry
	errNotFound error
	_           resilience.Policy = cb
)

// outlierListener is any grpc/outlier Listener.
type outlierListener = interface {
	Ejected(addr string, reason string)
	Returned(addr string)
}
`

// isFragment reports whether line marks the next fence as a fragment.
func isFragment(line string) bool {
	return line == fragmentMarker || strings.HasPrefix(line, "<!-- fragment:") && strings.HasSuffix(line, "-->")
}

var fromRe = regexp.MustCompile(`^<!-- fragment: from (\S+) -->$`)

// TestFragmentsFromFiles checks each fragment marked "from PATH": its
// lines, indentation aside, are a run of PATH's lines.
func TestFragmentsFromFiles(t *testing.T) {
	checked := 0
	for _, doc := range docFiles(t) {
		for _, b := range blocks(readDoc(t, doc)) {
			m := fromRe.FindStringSubmatch(b.prev)
			if !b.fence || m == nil {
				continue
			}
			checked++
			src := readDoc(t, m[1])
			if !containsRun(trimmedLines(src), trimmedLines(b.text)) {
				t.Errorf("%s:%d: the snippet says it is from %s, but its lines are not a run of that file's: copy it again", doc, b.line, m[1])
			}
		}
	}
	if checked == 0 {
		t.Error("no fragment marked from a file: README.md's example should be")
	}
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

func containsRun(hay, needle []string) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		j := 0
		for j < len(needle) && hay[i+j] == needle[j] {
			j++
		}
		if j == len(needle) {
			return true
		}
	}
	return false
}

type snippet struct {
	doc  string
	line int
	code string
}

func goSnippets(t *testing.T) (compiled, fragments []snippet) {
	for _, doc := range docFiles(t) {
		for _, b := range blocks(readDoc(t, doc)) {
			if !b.fence || b.lang != "go" {
				continue
			}
			s := snippet{doc: doc, line: b.line, code: b.text}
			if isProgramFile(b.prev) {
				continue // built with its program's other files: gettingstarted_test.go
			}
			if isFragment(b.prev) {
				fragments = append(fragments, s)
			} else {
				compiled = append(compiled, s)
			}
		}
	}
	return compiled, fragments
}

// TestGoSnippetsCompile compiles every Go snippet not marked as a fragment.
func TestGoSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet over every snippet")
	}
	compiled, fragments := goSnippets(t)
	if len(compiled) < 10 {
		t.Fatalf("only %d snippets to compile (%d fragments): is the fence pattern still right?", len(compiled), len(fragments))
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "examples"), "_docsnippets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	where := map[string]snippet{} // package dir → snippet
	for i, s := range compiled {
		pkg := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		files, err := wrap(s.code)
		if err != nil {
			t.Errorf("%s:%d: the snippet does not parse as Go (mark it %s if it is not meant to): %v", s.doc, s.line, fragmentMarker, err)
			continue
		}
		for name, src := range files {
			if err := os.WriteFile(filepath.Join(pkg, name), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		where[filepath.Base(pkg)] = s
	}
	// Each package by its path: "…/..." skips a directory whose name starts
	// with "_", as this one's does, so that one left behind by a killed run
	// is ignored by every ./... of the module.
	args := []string{"vet"}
	for p := range where {
		args = append(args, "./"+filepath.Base(dir)+"/"+p)
	}
	sort.Strings(args[1:])
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = filepath.Join(root, "examples")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	// Name each failing snippet by its place in the docs.
	byPkg := map[string][]string{}
	pkgRe := regexp.MustCompile(regexp.QuoteMeta(filepath.Base(dir)) + `/(s\d+)/`)
	for _, l := range strings.Split(string(out), "\n") {
		if m := pkgRe.FindStringSubmatch(l); m != nil {
			byPkg[m[1]] = append(byPkg[m[1]], l)
		}
	}
	if len(byPkg) == 0 {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	names := make([]string, 0, len(byPkg))
	for p := range byPkg {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		s := where[p]
		t.Errorf("%s:%d: the Go snippet does not compile (fix it, or mark it %s):\n%s\n--- snippet:\n%s",
			s.doc, s.line, fragmentMarker, strings.Join(byPkg[p], "\n"), s.code)
	}
}

var bareReturnRe = regexp.MustCompile(`(?m)^\s*return\s*(//.*)?$`)

var selectorRe = regexp.MustCompile(`\b([a-z][a-zA-Z0-9]*)\.[A-Za-z_]`)

// wrap turns a snippet into the files of a package (see the top of this
// file).
func wrap(code string) (map[string]string, error) {
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return map[string]string{"snippet.go": code}, nil
	}
	imports, rest := splitImports(code)
	// Declarations at the top level, or statements in a function?
	file := "package snippet\n\n" + rest
	decls, err := parser.ParseFile(fset, "", file, parser.SkipObjectResolution)
	body := ""
	sig := "func _() error {\n"
	if err != nil {
		fn := "package snippet\n\n" + sig + rest + "\n}\n"
		f, ferr := parser.ParseFile(fset, "", fn, parser.SkipObjectResolution)
		if ferr != nil {
			return nil, ferr
		}
		body = rest + "\n" + blanks(f)
		if bareReturnRe.MatchString(rest) {
			sig = "func _() {\n" // the snippet returns nothing
		} else {
			body += "\treturn nil\n"
		}
		file = ""
	} else {
		_ = decls
	}
	have := map[string]bool{}
	for _, imp := range imports {
		have[importName(imp)] = true
	}
	src := file + body
	for _, m := range selectorRe.FindAllStringSubmatch(src, -1) {
		if p, ok := knownImports[m[1]]; ok && !have[m[1]] && !declaresName(src, m[1]) {
			have[m[1]] = true
			imports = append(imports, p+"\x00"+m[1]) // path and name, split below
		}
	}
	var ib strings.Builder
	ib.WriteString("package snippet\n\nimport (\n")
	for _, imp := range imports {
		path, name, ok := strings.Cut(imp, "\x00")
		if !ok {
			ib.WriteString("\t" + imp + "\n")
			continue
		}
		if filepath.Base(path) == name {
			fmt.Fprintf(&ib, "\t%q\n", path)
		} else {
			fmt.Fprintf(&ib, "\t%s %q\n", name, path)
		}
	}
	ib.WriteString(")\n\n")
	var main string
	if file != "" {
		main = ib.String() + rest + "\n"
	} else {
		main = ib.String() + sig + body + "}\n"
	}
	return map[string]string{"snippet.go": main, "ambient.go": ambientGo}, nil
}

// splitImports removes a leading import declaration (one line or a block)
// from code, and returns its specs as written.
func splitImports(code string) (specs []string, rest string) {
	lines := strings.Split(code, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !strings.HasPrefix(lines[i], "import") {
		return nil, code
	}
	if l := strings.TrimSpace(strings.TrimPrefix(lines[i], "import")); l != "(" {
		return []string{l}, strings.Join(lines[i+1:], "\n")
	}
	for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
		if s := strings.TrimSpace(lines[i]); s != "" {
			specs = append(specs, s)
		}
	}
	return specs, strings.Join(lines[i+1:], "\n")
}

// importName is the name an import spec binds: its explicit name, or the
// last element of its path.
func importName(spec string) string {
	fields := strings.Fields(spec)
	if len(fields) == 2 {
		return fields[0]
	}
	return filepath.Base(strings.Trim(spec, `"`))
}

// declaresName reports whether src declares name itself (a variable that
// shadows a package name, such as a local "retry").
func declaresName(src, name string) bool {
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(name)+`\b[^.\n]*:=`).MatchString(src) ||
		regexp.MustCompile(`\bvar `+regexp.QuoteMeta(name)+`\b`).MatchString(src)
}

// blanks returns `_ = x` for each variable the function's top-level
// statements declare.
func blanks(f *ast.File) string {
	var sb strings.Builder
	seen := map[string]bool{}
	add := func(id *ast.Ident) {
		if id != nil && id.Name != "_" && !seen[id.Name] {
			seen[id.Name] = true
			sb.WriteString("\t_ = " + id.Name + "\n")
		}
	}
	fn := f.Decls[0].(*ast.FuncDecl)
	for _, st := range fn.Body.List {
		switch s := st.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return sb.String()
}
