package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// docFiles returns README.md, docs/*.md and docs/benchmarks/*.md, relative
// to root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(root, "docs", "benchmarks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 10 {
		t.Fatalf("found only %v: is root (%s) the repository?", out, root)
	}
	return out
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// line is one line of a Markdown file outside code fences, or a whole fence.
type block struct {
	line  int    // 1-based line of the text, or of the opening fence
	text  string // the line, or the fence's content
	lang  string // the fence's info string; "" for a text line
	fence bool
	prev  string // for a fence: the last non-blank line before it
}

// blocks splits a Markdown document into text lines and fenced code blocks.
func blocks(doc string) []block {
	var out []block
	lines := strings.Split(doc, "\n")
	prev := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			marker := trimmed[:3]
			b := block{line: i + 1, lang: strings.TrimSpace(trimmed[3:]), fence: true, prev: prev}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), marker); i++ {
				body = append(body, lines[i])
			}
			b.text = strings.Join(body, "\n") + "\n"
			out = append(out, b)
			prev = ""
			continue
		}
		out = append(out, block{line: i + 1, text: l})
		if trimmed != "" {
			prev = trimmed
		}
	}
	return out
}

var (
	headingRe = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// linkRe finds inline links and images: [text](target) and ![alt](target).
	linkRe       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
	mdLinkRe     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the anchors GitHub generates for the headings of doc:
// lower case, punctuation dropped, spaces to hyphens, repeats numbered.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, b := range blocks(doc) {
		if b.fence {
			continue
		}
		m := headingRe.FindStringSubmatch(b.text)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(heading string) string {
	heading = mdLinkRe.ReplaceAllString(heading, "$1")
	var sb strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}
