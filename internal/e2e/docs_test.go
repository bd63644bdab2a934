package e2e

// The documentation's pages are README.md and docs/*.md. TestREADME (build
// tag e2e, readme_test.go) runs their examples; the tests of this file
// have no build tag, so `go test ./...` runs them, and read the pages
// without running anything:
//
//   - TestDocsExamples: every fenced block has a <!-- readme-test: NAME -->
//     marker right above it, each NAME is used once across all the pages
//     and is a check of TestREADME (a key of readmeChecks, read from
//     readme_test.go's source), and each check has its block;
//   - TestDocsLinks: each relative link of a page names a file that exists
//     and, with a #fragment into a page, a heading of that page;
//   - TestDocsCitations: each citation of the docs in the Go sources names
//     a page, and a heading of that page, that exist;
//   - TestDocsReadmeShort: the README stays a front page (300 lines at most).
//
// A citation in a comment (or a flag's usage) is written
//
//	(README, Install)
//	(docs/operations.md, Rate limits)
//	(docs/mcp-front.md, "What MCP hosts see")
//
// the page, a comma, and a heading of that page (a "## …" line, or the
// bold words that open a paragraph or an item, such as **Start-up.**),
// quoted or not; a heading with a colon may be cited by the words before
// it. The word docs alone in place of the page names a heading of any
// page of docs/. Text after a colon or a semicolon is the
// citation's own comment: (README, Install: the release binaries).

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeBlock is one fenced block of a documentation page.
type readmeBlock struct {
	file string // the page, relative to the module root: README.md, docs/….md
	name string // from its marker
	lang string // after the opening fence: sh, json, or none
	text string
	line int // of the opening fence, 1-based
}

// at is the block's file:line, for messages.
func (b readmeBlock) at() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

const readmeMarker = "<!-- readme-test: "

// docPages returns the documentation's pages, relative to root: README.md,
// then docs/*.md in name order.
func docPages(t testing.TB, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// readmeBlocks returns the fenced blocks of every page (docPages), in
// order. A block without a marker right above it, or a marker not right
// above a block, is an error naming its file and line.
func readmeBlocks(t testing.TB, root string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	for _, page := range docPages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		var cur *readmeBlock
		var body []string
		pending, pendingLine := "", 0
		for i, line := range strings.Split(string(b), "\n") {
			n := i + 1
			if cur != nil {
				if strings.HasPrefix(line, "```") {
					cur.text = strings.Join(body, "\n") + "\n"
					blocks = append(blocks, *cur)
					cur, body = nil, nil
					continue
				}
				body = append(body, line)
				continue
			}
			if name, ok := strings.CutPrefix(line, readmeMarker); ok {
				pending, pendingLine = strings.TrimSuffix(strings.TrimSpace(name), " -->"), n
				continue
			}
			if lang, ok := strings.CutPrefix(line, "```"); ok {
				if pending == "" || pendingLine != n-1 {
					t.Errorf("%s:%d: a block without a %sNAME --> line right above it: every example needs a check in internal/e2e/readme_test.go", page, n, readmeMarker)
				}
				cur = &readmeBlock{file: page, name: pending, lang: strings.TrimSpace(lang), line: n}
				pending = ""
				continue
			}
			if pending != "" && strings.TrimSpace(line) != "" {
				t.Errorf("%s:%d: marker %q is not right above a block", page, pendingLine, pending)
				pending = ""
			}
		}
		if cur != nil {
			t.Fatalf("%s: block not closed", cur.at())
		}
	}
	return blocks
}

// readmeMarkersOnce reports a marker used by two blocks (of any pages) and
// returns the blocks by name.
func readmeMarkersOnce(t testing.TB, blocks []readmeBlock) map[string]readmeBlock {
	t.Helper()
	seen := map[string]readmeBlock{}
	for _, b := range blocks {
		if b.name == "" {
			continue // reported by readmeBlocks
		}
		if first, ok := seen[b.name]; ok {
			t.Errorf("%s: marker %q used twice (first at %s)", b.at(), b.name, first.at())
			continue
		}
		seen[b.name] = b
	}
	return seen
}

// docsModuleRoot is the nearest directory above the working directory
// holding go.mod.
func docsModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// readmeCheckNames reads the keys of readmeChecks from readme_test.go's
// source: the one list of TestREADME's checks, which this file cannot
// reference (it is built without the e2e tag).
func readmeCheckNames(t testing.TB) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "readme_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "readmeChecks" || len(spec.Values) != 1 {
			return true
		}
		lit, ok := spec.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatalf("readme_test.go: readmeChecks is not a map literal")
		}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, ok := kv.Key.(*ast.BasicLit)
			if !ok || key.Kind != token.STRING {
				t.Fatalf("readme_test.go: a key of readmeChecks is not a string literal")
			}
			name, err := strconv.Unquote(key.Value)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		return false
	})
	if len(names) == 0 {
		t.Fatalf("readme_test.go: no readmeChecks map with string keys")
	}
	return names
}

func TestDocsExamples(t *testing.T) {
	root := docsModuleRoot(t)
	checks := readmeCheckNames(t)
	byName := readmeMarkersOnce(t, readmeBlocks(t, root))
	for name, b := range byName {
		if !slices.Contains(checks, name) {
			t.Errorf("%s: marker %q has no check in internal/e2e/readme_test.go (readmeChecks)", b.at(), name)
		}
	}
	var unused []string
	for _, name := range checks {
		if _, ok := byName[name]; !ok {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("checks whose block is gone from README.md and docs/*.md (or lost its marker): %v", unused)
	}
}

func TestDocsReadmeShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(docsModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 300 {
		t.Errorf("README.md has %d lines: a front page has at most 300; move a topic to docs/", n)
	}
}

// docHeading is a heading of a page: a "#" line, or the bold words that
// open a paragraph or a list item (a run-in heading such as **Start-up.**).
type docHeading struct {
	text   string
	anchor string // GitHub's id of a "#" heading; "" for a run-in one
	line   int
}

var (
	docHeadingLine = regexp.MustCompile(`^(#{1,6})\s+(.+?)\s*#*\s*$`)
	docRunIn       = regexp.MustCompile(`^\s*(?:[-*]\s+)?\*\*([^*]+)\*\*`)
)

// docHeadings returns the headings of a page's text, outside fenced blocks.
func docHeadings(text string) []docHeading {
	var hs []docHeading
	used := map[string]int{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := docHeadingLine.FindStringSubmatch(line); m != nil {
			a := docAnchor(m[2])
			if n := used[a]; n > 0 {
				used[a]++
				a = fmt.Sprintf("%s-%d", a, n)
			} else {
				used[a] = 1
			}
			hs = append(hs, docHeading{text: m[2], anchor: a, line: i + 1})
			continue
		}
		if m := docRunIn.FindStringSubmatch(line); m != nil {
			hs = append(hs, docHeading{text: m[1], line: i + 1})
		}
	}
	return hs
}

// docAnchor is the id GitHub gives a heading: lower case, without the
// characters other than letters, digits, spaces, '-' and '_', each space a
// '-'.
func docAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docNorm is a heading or a cited name as compared: no backticks, no final
// '.', spaces folded, lower case.
func docNorm(s string) string {
	s = strings.ReplaceAll(s, "`", "")
	s = strings.Join(strings.Fields(s), " ")
	return strings.ToLower(strings.TrimRight(s, ".:"))
}

// docHasHeading reports whether name is one of hs: the whole heading, or
// the words before its first colon.
func docHasHeading(hs []docHeading, name string) bool {
	n := docNorm(name)
	for _, h := range hs {
		t := docNorm(h.text)
		if t == n {
			return true
		}
		if before, _, ok := strings.Cut(t, ":"); ok && strings.TrimSpace(before) == n {
			return true
		}
	}
	return false
}

var (
	docFence      = regexp.MustCompile("(?ms)^```.*?^```")
	docCodeSpan   = regexp.MustCompile("`[^`]*`")
	docLink       = regexp.MustCompile(`\[([^\]]*)\]\(([^()\s]+)\)`)
	docAbsoluteRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

func TestDocsLinks(t *testing.T) {
	root := docsModuleRoot(t)
	headings := map[string][]docHeading{}
	texts := map[string]string{}
	for _, page := range docPages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		texts[page] = string(b)
		headings[page] = docHeadings(string(b))
	}
	links := 0
	for _, page := range docPages(t, root) {
		// Blocks and code spans hold no links: blank them, keeping the
		// line count for messages.
		text := docFence.ReplaceAllStringFunc(texts[page], docBlank)
		text = docCodeSpan.ReplaceAllStringFunc(text, docBlank)
		for _, m := range docLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[4]:m[5]]
			line := strings.Count(text[:m[0]], "\n") + 1
			if docAbsoluteRe.MatchString(target) {
				continue // a URL
			}
			links++
			path, frag, _ := strings.Cut(target, "#")
			dest := page
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), path)))
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", page, line, target, dest)
					continue
				}
			}
			if frag == "" {
				continue
			}
			hs, ok := headings[dest]
			if !ok {
				t.Errorf("%s:%d: link %q: a #fragment into %s, which is not a page of the docs", page, line, target, dest)
				continue
			}
			if !slices.ContainsFunc(hs, func(h docHeading) bool { return h.anchor == frag }) {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", page, line, target, dest, frag)
			}
		}
	}
	if links == 0 {
		t.Fatal("no link between the pages found: the test reads nothing")
	}
}

// docBlank is s with every character but newlines a space.
func docBlank(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, s)
}

// A citation: the page, then ", X", ", \"X\"", ": \"X\"" or " (\"X\"";
// or the word docs in place of the page (any page of docs/). An unquoted X runs to the first ) ; : , or quote, and
// starts with a capital letter (else it is prose: "the README, which …").
var (
	docCitation    = regexp.MustCompile(`(README\.md|README|docs/[a-z0-9-]+\.md)(?:, "([^"\n]{1,100})"|: "([^"\n]{1,100})"| \("([^"\n]{1,100})"|, ([A-Z][^);:,"\n]*))?`)
	docAnyCitation = regexp.MustCompile(`\(docs, (?:"([^"\n]{1,100})"|([A-Z][^);:,"\n]*))`)
)

// docCommentWrap joins a comment's lines: a citation may wrap.
var docCommentWrap = regexp.MustCompile(`\s*\n\s*//\s*`)

func TestDocsCitations(t *testing.T) {
	root := docsModuleRoot(t)
	headings := map[string][]docHeading{}
	var docsAll []docHeading
	for _, page := range docPages(t, root) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		headings[page] = docHeadings(string(b))
		if strings.HasPrefix(page, "docs/") {
			docsAll = append(docsAll, headings[page]...)
		}
	}
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		src := string(b)
		joined := docCommentWrap.ReplaceAllString(src, " ")
		for _, m := range docAnyCitation.FindAllStringSubmatch(joined, -1) {
			name := strings.TrimSpace(m[1] + m[2])
			cited++
			if !docHasHeading(docsAll, name) {
				t.Errorf("%s: %q: no page of docs/ has the heading %q", rel, m[0], name)
			}
		}
		for _, m := range docCitation.FindAllStringSubmatch(joined, -1) {
			page, name := m[1], strings.TrimSpace(m[2]+m[3]+m[4]+m[5])
			if page == "README" {
				page = "README.md"
			}
			if _, err := os.Stat(filepath.Join(root, page)); err != nil {
				t.Errorf("%s: %q: %s does not exist", rel, m[0], page)
				continue
			}
			if name == "" {
				continue // the page as a whole
			}
			cited++
			if !docHasHeading(headings[page], name) {
				t.Errorf("%s: %q: %s has no heading %q", rel, m[0], page, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Fatal(errors.New("no citation of the docs found in the Go sources: the test reads nothing"))
	}
	t.Logf("%d citations of the docs' headings in the Go sources", cited)
}
