package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches an inline Markdown link or image target: [text](target)
// with an optional "title". Reference-style links are not used here.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestDocLinks checks that every relative link in the project's documents
// names a file or directory that exists, so a moved or deleted file does
// not leave a newcomer at a dead end. URLs and in-page anchors are not
// followed.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, pattern := range []string{"*.md", "docs/*.md", "docs/adr/*.md", "*/README.md", "*/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	if len(docs) < 5 {
		t.Fatalf("found %d Markdown files under %s; expected DESIGN.md, README.md, docs/…", len(docs), root)
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, doc)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if filepath.IsAbs(target) {
					t.Errorf("%s:%d: link %q is an absolute path; link within the repository", name, i+1, m[1])
					continue
				}
				path := filepath.Join(filepath.Dir(doc), target)
				if rel, err := filepath.Rel(root, path); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", name, i+1, m[1])
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q names no file", name, i+1, m[1])
				}
			}
		}
	}
}
