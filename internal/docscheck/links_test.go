package docscheck

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelativeLinks checks every relative link of README.md and docs/*.md:
// the file or directory it names exists, and an #anchor into a Markdown
// file (or into the same file) is one of that file's headings. Links in
// code (fenced or inline) are not links and are skipped, as are absolute
// URLs.
func TestRelativeLinks(t *testing.T) {
	checked := 0
	for _, doc := range docFiles(t) {
		text := readDoc(t, doc)
		for _, b := range blocks(text) {
			if b.fence {
				continue
			}
			line := inlineCodeRe.ReplaceAllString(b.text, "")
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if msg := checkLink(doc, text, target); msg != "" {
					t.Errorf("%s:%d: link %q: %s", doc, b.line, target, msg)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d relative links: is the link pattern still right?", checked)
	}
}

// checkLink returns what is wrong with target, a link in doc, or "".
func checkLink(doc, text, target string) string {
	file, anchor, _ := strings.Cut(target, "#")
	if strings.HasPrefix(file, "/") {
		return "an absolute path; use a path relative to " + doc
	}
	resolved := path.Clean(path.Join(path.Dir(doc), file))
	if strings.HasPrefix(resolved, "../") || resolved == ".." {
		return "leaves the repository (" + resolved + "); docs must be self-contained"
	}
	if file != "" {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(resolved)))
		switch {
		case err == nil:
			text = string(b)
		case isDir(filepath.Join(root, filepath.FromSlash(resolved))):
			if anchor != "" {
				return "an anchor into a directory"
			}
			return ""
		default:
			return resolved + " does not exist"
		}
	}
	if anchor == "" || !strings.HasSuffix(resolved, ".md") && file != "" {
		return ""
	}
	if !anchors(text)[anchor] {
		if file == "" {
			resolved = doc
		}
		return "no heading of " + resolved + " has the anchor #" + anchor
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestAnchorsLikeGitHub pins the slug rule the link test relies on.
func TestAnchorsLikeGitHub(t *testing.T) {
	got := anchors("# gRPC: B5\n## `keyBy`: one breaker, or per method\n## Cost\n## Cost\n```\n# not a heading\n```\n")
	for _, want := range []string{"grpc-b5", "keyby-one-breaker-or-per-method", "cost", "cost-1"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code fence became an anchor: %v", got)
	}
}
