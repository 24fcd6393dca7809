package docscheck

// docs/getting-started.md is followed here as a reader follows it: its
// programs are built in a module of their own, and run, and what they
// print is held to what the page shows. Its blocks are marked, on the last
// non-blank line before the fence:
//
//	<!-- program first, metrics: server.go -->  the block is server.go of the programs first and metrics
//	<!-- output of first -->                    first prints the block's lines, in order, and nothing else
//	<!-- output of misspelt -->                 a variant (see variants) prints them, in order, among others
//	<!-- output of metrics /metrics -->         the distinct meshless_ names metrics serves at /metrics
//
// The module requires github.com/meshless/meshless, replaced by this
// repository; its module graph is fetched into the module cache (see
// fetchModules), and it is tidied and built offline (GOPROXY=off): its go.mod
// lists, besides, the requirements of examples/go.mod, which needs every
// module the page's programs import, and its go.sum is the repository's.
// go mod tidy keeps what the programs use.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const gettingStarted = "docs/getting-started.md"

var (
	programRe = regexp.MustCompile(`^<!-- program ([a-z0-9, ]+): (\S+) -->$`)
	outputRe  = regexp.MustCompile(`^<!-- output of ([a-z0-9]+)( /metrics)? -->$`)
)

// isProgramFile reports whether line marks the next fence as a file of a
// program of the page: TestGettingStartedPrograms builds it with the
// program's other files.
func isProgramFile(line string) bool { return programRe.MatchString(line) }

// variants are programs the page makes by changing one of its own: a
// string in a file, the program run again without a new build.
var variants = []struct {
	name, of, file, old, new string
	fails                    bool // exits with an error
}{
	{"misspelt", "first", "client.yaml", "grpc.health.v1.Health:", "grpc.health.v1.Helth:", true},
	{"unlinked", "first", "client.yaml", "grpc.health.v1.Health:", "payment.PaymentServce:", false},
}

// page is what getting-started.md holds for the test.
type page struct {
	text     string
	programs map[string]map[string]string // program → file → content
	outputs  map[string][]string          // "first", "misspelt", "metrics /metrics" → lines
}

func readPage(t *testing.T) page {
	t.Helper()
	p := page{text: readDoc(t, gettingStarted), programs: map[string]map[string]string{}, outputs: map[string][]string{}}
	for _, b := range blocks(p.text) {
		if !b.fence {
			continue
		}
		if m := programRe.FindStringSubmatch(b.prev); m != nil {
			for _, name := range strings.Split(m[1], ",") {
				name = strings.TrimSpace(name)
				if p.programs[name] == nil {
					p.programs[name] = map[string]string{}
				}
				if _, dup := p.programs[name][m[2]]; dup {
					t.Errorf("%s:%d: program %s has two %s", gettingStarted, b.line, name, m[2])
				}
				p.programs[name][m[2]] = b.text
			}
		}
		if m := outputRe.FindStringSubmatch(b.prev); m != nil {
			var lines []string
			for _, l := range strings.Split(strings.TrimRight(b.text, "\n"), "\n") {
				lines = append(lines, strings.TrimRight(l, " "))
			}
			p.outputs[m[1]+m[2]] = lines
		}
	}
	return p
}

// goEnv runs the go command offline, outside the repository's workspace.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
}

var requireRe = regexp.MustCompile(`(?m)^\s+(\S+) (v\S+)( // indirect)?$`)

// requires returns the module paths a go.mod requires, and whether each
// is direct.
func requires(gomod string) map[string]bool {
	out := map[string]bool{}
	for _, m := range requireRe.FindAllStringSubmatch(gomod, -1) {
		out[m[1]] = m[3] == ""
	}
	return out
}

// module writes files as the main package of a new module in a temporary
// directory, tidies and builds it, and returns the directory, the binary and
// the tidied go.mod.
func module(t *testing.T, files map[string]string) (dir, bin, gomod string) {
	t.Helper()
	repo, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	var req strings.Builder
	for _, m := range requireRe.FindAllStringSubmatch(readDoc(t, "examples/go.mod"), -1) {
		if m[1] != "github.com/meshless/meshless" {
			fmt.Fprintf(&req, "\t%s %s\n", m[1], m[2])
		}
	}
	files = maps.Clone(files)
	files["go.mod"] = "module example.com/meshless-start\n\ngo 1.26\n\nrequire (\n\tgithub.com/meshless/meshless v0.0.0\n" + req.String() +
		")\n\nreplace github.com/meshless/meshless => " + repo + "\n"
	files["go.sum"] = readDoc(t, "go.sum") + readDoc(t, "examples/go.sum")
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fetchModules(t, dir)
	bin = filepath.Join(dir, "start")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", bin, "."}} {
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir, cmd.Env = dir, goEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module of %s's files: %v\n%s", strings.Join(args, " "), gettingStarted, err, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, bin, string(b)
}

// fetchModules puts every module of dir's module graph in the module
// cache, through the user's GOPROXY: go mod tidy also reads the modules
// that only the dependencies' tests import (go-cmp for grpc's, say), which
// building the repository never fetched, so a fresh machine lacks them.
// What is cached already is not fetched again. When they cannot be fetched
// (no network), the test skips, and under CI=true it fails.
func fetchModules(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "mod", "download", "all")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("the programs of %s need every module of their module graph in the module cache, and go mod download all failed: %v\n%s", gettingStarted, err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// inOrder checks that each of want ends a line of got, in order, and
// returns what does not.
func inOrder(got, want []string) string {
	i := 0
	for _, w := range want {
		for i < len(got) && !strings.HasSuffix(strings.TrimRight(got[i], " "), w) {
			i++
		}
		if i == len(got) {
			return w
		}
		i++
	}
	return ""
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// run runs bin in dir and returns what it printed, stdout and stderr
// together, and its error.
func run(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// section returns the text of the page's section that starts with heading
// ("## 5."), up to the next one.
func (p page) section(heading string) string {
	i := strings.Index(p.text, "\n"+heading)
	if i < 0 {
		return ""
	}
	rest := p.text[i+1:]
	if j := strings.Index(rest[len(heading):], "\n## "); j >= 0 {
		return rest[:len(heading)+j]
	}
	return rest
}

// TestGettingStartedPrograms builds the page's programs and checks that
// each prints what the page shows: the first one's calls, the misspelt
// service's error, the unlinked one's silence, and the metrics program's
// /metrics, read while it serves them; and that the page names the modules
// the metrics step adds.
func TestGettingStartedPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs of " + gettingStarted)
	}
	p := readPage(t)
	for _, name := range []string{"first", "metrics"} {
		if len(p.programs[name]) < 3 {
			t.Fatalf("%s: program %s has files %v, want client.yaml, server.go, calls.go, main.go: are its blocks marked <!-- program %s: FILE -->?",
				gettingStarted, name, slices.Sorted(maps.Keys(p.programs[name])), name)
		}
	}
	for _, key := range []string{"first", "misspelt", "metrics /metrics"} {
		if len(p.outputs[key]) == 0 {
			t.Fatalf("%s: no block marked <!-- output of %s -->", gettingStarted, key)
		}
	}

	dir, bin, firstMod := module(t, p.programs["first"])
	t.Run("first", func(t *testing.T) {
		out, err := run(t, dir, bin)
		if err != nil {
			t.Fatalf("the program of step 4: %v\n%s", err, out)
		}
		if got, want := lines(out), p.outputs["first"]; !slices.Equal(got, want) {
			t.Errorf("the program of step 4 prints\n%s\n\n%s shows\n%s", out, gettingStarted, strings.Join(want, "\n"))
		}
	})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if !strings.Contains(p.text, strings.TrimSuffix(v.new, ":")) {
				t.Errorf("%s does not name %s, the variant the test runs", gettingStarted, v.new)
			}
			vdir := t.TempDir()
			for name, content := range p.programs[v.of] {
				if name == v.file {
					if !strings.Contains(content, v.old) {
						t.Fatalf("%s of program %s has no %q to change", name, v.of, v.old)
					}
					content = strings.ReplaceAll(content, v.old, v.new)
				}
				if err := os.WriteFile(filepath.Join(vdir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := run(t, vdir, bin)
			switch {
			case v.fails && err == nil:
				t.Errorf("with %s, the program ran: want it to stop\n%s", v.new, out)
			case !v.fails && err != nil:
				t.Errorf("with %s, the program failed: %v\n%s", v.new, err, out)
			case !v.fails && !slices.Equal(lines(out), p.outputs["first"]):
				t.Errorf("with %s, the program prints\n%s\nwant what step 4 shows", v.new, out)
			}
			if want, ok := p.outputs[v.name]; ok {
				if missing := inOrder(lines(out), want); missing != "" {
					t.Errorf("with %s, the program prints\n%s\nwithout the line %s shows:\n%s", v.new, out, gettingStarted, missing)
				}
			}
		})
	}

	t.Run("metrics", func(t *testing.T) {
		mdir, mbin, metricsMod := module(t, p.programs["metrics"])
		// The modules the step adds: each direct one by its path, each new
		// one (not among meshless's own requirements) at least by its name.
		step := p.section("## 5.")
		first, meshless := requires(firstMod), requires(readDoc(t, "go.mod"))
		for mod, direct := range requires(metricsMod) {
			_, inFirst := first[mod]
			_, ofMeshless := meshless[mod]
			switch {
			case direct && !first[mod] && !strings.Contains(step, "`"+mod+"`"):
				t.Errorf("step 5 of %s makes %s a requirement of the module but does not name it", gettingStarted, mod)
			case !direct && !inFirst && !ofMeshless && !namesModule(step, mod):
				t.Errorf("step 5 of %s adds the module %s but does not name it", gettingStarted, mod)
			}
		}
		served, printed := serveMetrics(t, mdir, mbin)
		if !slices.Equal(printed, p.outputs["first"]) {
			t.Errorf("the program of step 5 prints\n%s\nwant what step 4 shows, then the metrics' address", strings.Join(printed, "\n"))
		}
		if want := p.outputs["metrics /metrics"]; !slices.Equal(served, want) {
			t.Errorf("/metrics has the names\n%s\n%s shows\n%s", strings.Join(served, "\n"), gettingStarted, strings.Join(want, "\n"))
		}
	})
}

// namesModule reports whether text names mod in backticks: its path, or its
// last one or two elements.
func namesModule(text, mod string) bool {
	parts := strings.Split(mod, "/")
	for _, n := range []int{len(parts), 2, 1} {
		if n <= len(parts) && strings.Contains(text, "`"+strings.Join(parts[len(parts)-n:], "/")+"`") {
			return true
		}
	}
	return false
}

var metricsLineRe = regexp.MustCompile(`^metrics: (http://\S+/metrics) `)
var meshlessNameRe = regexp.MustCompile(`(?m)^meshless_[a-z_]*`)

// serveMetrics runs the metrics program on a free port: once it prints its
// address (its calls are over), it reads /metrics, then interrupts it, and
// returns the distinct meshless_ names served, as the page's curl | grep |
// sort -u does, and the lines printed before the address.
func serveMetrics(t *testing.T, dir, bin string) (names, printed []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-metrics", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	url := ""
	for url == "" && sc.Scan() {
		if m := metricsLineRe.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		} else {
			printed = append(printed, sc.Text())
		}
	}
	if url != "" {
		tr := &http.Transport{DisableKeepAlives: true}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
		} else {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Errorf("GET %s: %v", url, err)
			}
			seen := map[string]bool{}
			for _, n := range meshlessNameRe.FindAllString(string(body), -1) {
				seen[n] = true
			}
			for n := range seen {
				names = append(names, n)
			}
			sort.Strings(names)
		}
		tr.CloseIdleConnections()
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Errorf("interrupting the program: %v", err)
	}
	for sc.Scan() {
		t.Errorf("the program printed after its metrics' address: %s", sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the program of step 5 ended with %v once interrupted: want exit status 0", err)
	}
	if url == "" {
		t.Fatalf("the program of step 5 never printed its metrics' address; it printed:\n%s", strings.Join(printed, "\n"))
	}
	return names, printed
}

// TestGettingStartedHTTP builds step 7's program, a weather API on a local
// port and a client through httpmw, and checks that it prints what the page
// shows: the retried 503, the 404 passed through, the breaker opening.
func TestGettingStartedHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the HTTP program of " + gettingStarted)
	}
	p := readPage(t)
	files := p.programs["http"]
	if len(files) != 2 {
		t.Fatalf("%s: program http has files %v, want weather-client.yaml and main.go: are its blocks marked <!-- program http: FILE -->?",
			gettingStarted, slices.Sorted(maps.Keys(files)))
	}
	want := p.outputs["http"]
	if len(want) == 0 {
		t.Fatalf("%s: no block marked <!-- output of http -->", gettingStarted)
	}
	dir, bin, _ := module(t, files)
	out, err := run(t, dir, bin)
	if err != nil {
		t.Fatalf("the program of step 7: %v\n%s", err, out)
	}
	if got := lines(out); !slices.Equal(got, want) {
		t.Errorf("the program of step 7 prints\n%s\n\n%s shows\n%s", out, gettingStarted, strings.Join(want, "\n"))
	}
}
