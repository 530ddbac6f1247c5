// Package docs holds the checks of the documentation: every relative link of
// the markdown pages resolves (to a file and, with #anchor, to a heading), and
// every docs/<page>.md named anywhere in the tree exists.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, one folder up from this package.
const root = ".."

// pages are the markdown files a reader follows links between: docs/**
// and the top-level README.md and CONTRIBUTING.md.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// inlineLink is [text](target) and ![alt](target); reference is
	// "[name]: target" at the start of a line.
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	reference  = regexp.MustCompile(`(?m)^\[[^\]]+\]:\s+(\S+)`)
	fence      = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	external   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links are the relative link targets of a page's text, code left out.
func links(text string) []string {
	text = fence.ReplaceAllString(text, "")
	text = codeSpan.ReplaceAllString(text, "")
	var out []string
	for _, re := range []*regexp.Regexp{inlineLink, reference} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if target := strings.Trim(m[1], "<>"); !external.MatchString(target) {
				out = append(out, target)
			}
		}
	}
	return out
}

// anchors are the ids GitHub gives a page's headings (lower case, letters,
// digits, '_', '-' and spaces kept, spaces to '-', "-1", "-2" for repeats)
// and its explicit <a id> / <a name> anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		h := mdLink.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[id+"-"+itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLinksResolve: every relative link of README.md, CONTRIBUTING.md and
// docs/** names a file or folder of the tree, and a #anchor on a markdown
// page names one of its headings (or of the page itself, for "#anchor").
func TestLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := cache[rel]; ok {
			return a
		}
		cache[rel] = anchors(read(t, rel))
		return cache[rel]
	}
	checked := 0
	for _, page := range pages(t) {
		for _, target := range links(read(t, page)) {
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := page
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), path)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s: link %q leaves the repository", page, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, target, dest)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, dest, anchor)
			}
		}
	}
	if checked < 100 {
		t.Errorf("%d links checked: the pages were not read", checked)
	}
}

// docPath is a docs/….md path named in any text: a comment, a test, a
// script, a Go string, a golden file, a URL of the documentation.
var docPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])(docs/[A-Za-z0-9_./-]+?\.md)\b`)

// TestNamedDocsExist: every docs/<path>.md that a file of the tree names
// exists, so that a page moved or renamed leaves no stale reference behind.
func TestNamedDocsExist(t *testing.T) {
	missing := map[string][]string{}
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.ContainsRune(string(b[:min(len(b), 8000)]), 0) {
			return nil // binary
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for _, m := range docPath.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				missing[m[1]] = append(missing[m[1]], filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("%d files read: the tree was not walked", files)
	}
	var names []string
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		where := missing[n]
		if len(where) > 5 {
			where = append(where[:5:5], "…")
		}
		t.Errorf("%s does not exist; named in %s", n, strings.Join(where, ", "))
	}
}

// figurePath is a figure (or a script's {placeholder} of one) followed by a
// package path where a unit belongs
// ("55,168 internal/records/s" for "55,168 records/s"): what a rewrite of
// import paths over prose leaves behind.
var figurePath = regexp.MustCompile(`[0-9}] (?:internal|storage|reporting|management|auction)/[a-z]+/s\b`)

// TestFiguresHaveUnits: no page and no script of deploy/local prints a
// figure in a package path's words.
func TestFiguresHaveUnits(t *testing.T) {
	files := pages(t)
	scripts, err := filepath.Glob(filepath.Join(root, "deploy", "local", "*.sh"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("scripts of deploy/local: %v %v", scripts, err)
	}
	for _, s := range scripts {
		rel, _ := filepath.Rel(root, s)
		files = append(files, filepath.ToSlash(rel))
	}
	for _, f := range files {
		for i, line := range strings.Split(read(t, f), "\n") {
			if m := figurePath.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: a unit, not a package path", f, i+1, m)
			}
		}
	}
}

// sections are docs/'s folders in the order of the indexes, each with the
// heading it has in the README's Documentation section.
var sections = []struct{ folder, heading string }{
	{"guide", "Guide"},
	{"reference", "API reference"},
	{"design", "Design records"},
	{"operations", "Operations"},
}

// linked is the set of pages (paths from the repository's root) that the
// relative links of text, read as the page at page, point at; a link to a
// folder counts as one to its README.md.
func linked(page, text string) map[string]bool {
	out := map[string]bool{}
	for _, target := range links(text) {
		path, _, _ := strings.Cut(target, "#")
		if path == "" {
			continue
		}
		p := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), path)))
		if !strings.HasSuffix(p, ".md") {
			p += "/README.md"
		}
		out[p] = true
	}
	return out
}

// TestIndexListsEveryPage: docs/ holds its four folders and its index, every
// page is listed in docs/README.md (a design record in the records' own
// index, docs/design/decisions/README.md), and the README's Documentation
// section lists every page under the heading of its folder, in the folders'
// order.
func TestIndexListsEveryPage(t *testing.T) {
	known := map[string]bool{"README.md": true, "links_test.go": true}
	for _, s := range sections {
		known[s.folder] = true
	}
	entries, err := os.ReadDir(filepath.Join(root, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("docs/%s: docs/ holds only the folders guide, reference, design, operations and the index README.md", e.Name())
		}
	}
	index := linked("docs/README.md", read(t, "docs/README.md"))
	records := linked("docs/design/decisions/README.md", read(t, "docs/design/decisions/README.md"))

	readme := read(t, "README.md")
	start := strings.Index(readme, "\n## Documentation\n")
	if start < 0 {
		t.Fatal("README.md has no ## Documentation section")
	}
	doc := readme[start+1:]
	if end := strings.Index(doc[3:], "\n## "); end >= 0 {
		doc = doc[:end+3]
	}
	under := map[string]map[string]bool{}
	last := -1
	for _, s := range sections {
		at := strings.Index(doc, "\n### "+s.heading+"\n")
		if at < 0 {
			t.Errorf("README.md's Documentation section has no ### %s", s.heading)
			continue
		}
		if at < last {
			t.Errorf("README.md: ### %s comes before the heading of the folder listed before it", s.heading)
		}
		last = at
		body := doc[at+1:]
		if end := strings.Index(body[4:], "\n### "); end >= 0 {
			body = body[:end+4]
		}
		under[s.folder] = linked("README.md", body)
	}

	pageCount := 0
	for _, page := range pages(t) {
		if !strings.HasPrefix(page, "docs/") || page == "docs/README.md" {
			continue
		}
		pageCount++
		folder, _, _ := strings.Cut(strings.TrimPrefix(page, "docs/"), "/")
		record := strings.HasPrefix(page, "docs/design/decisions/") && page != "docs/design/decisions/README.md"
		switch {
		case record && !records[page]:
			t.Errorf("%s is not listed in docs/design/decisions/README.md", page)
		case !record && !index[page]:
			t.Errorf("%s is not listed in docs/README.md", page)
		}
		if !record && under[folder] != nil && !under[folder][page] {
			t.Errorf("%s is not listed in README.md under its folder's heading", page)
		}
	}
	if pageCount < 30 {
		t.Errorf("%d pages under docs/: the pages were not read", pageCount)
	}
}
