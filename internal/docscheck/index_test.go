package docscheck

import (
	"path"
	"strings"
	"testing"
)

// maxPageLines is the length past which a page of docs/ answers more than
// one question and is split.
const maxPageLines = 600

// TestIndexLinksEveryPage checks that docs/README.md, the index, links every
// page of docs/, so that no page is found only by chance.
func TestIndexLinksEveryPage(t *testing.T) {
	const index = "docs/README.md"
	linked := map[string]bool{}
	for _, b := range blocks(readDoc(t, index)) {
		if b.fence {
			continue
		}
		for _, m := range linkRe.FindAllStringSubmatch(inlineCodeRe.ReplaceAllString(b.text, ""), -1) {
			file, _, _ := strings.Cut(m[1], "#")
			linked[path.Clean(path.Join("docs", file))] = true
		}
	}
	pages := 0
	for _, doc := range docFiles(t) {
		if doc == index || !strings.HasPrefix(doc, "docs/") {
			continue
		}
		pages++
		if !linked[doc] {
			t.Errorf("%s does not link %s: add a row that says which question it answers", index, doc)
		}
	}
	if pages < 20 {
		t.Errorf("found only %d pages in docs/: is the glob still right?", pages)
	}
}

// TestPagesAnswerOneQuestion checks that no page of README.md and docs/
// outgrows maxPageLines.
func TestPagesAnswerOneQuestion(t *testing.T) {
	for _, doc := range docFiles(t) {
		n := strings.Count(readDoc(t, doc), "\n")
		if n >= maxPageLines {
			t.Errorf("%s has %d lines (at most %d): split it into pages that each answer one question, and update docs/README.md", doc, n, maxPageLines-1)
		}
	}
}
