// Package archtest holds the repository's architecture documents to the
// code: the layer table of docs/architecture.md to the import graph that
// the go command reports, every package to having a package comment, and
// docs/decisions.md to the entry format its header states. It has no API;
// its tests run in `go test ./...`, offline, in about a second.
package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// module is the module whose packages the layer table places. The nested
// module interop/ is not part of it: `go list ./...` in the root does not
// reach it.
const module = "github.com/loupe-dev/loupe"

const (
	architectureDoc = "docs/architecture.md"
	decisionsDoc    = "docs/decisions.md"
)

// The kinds of package a row of the layer table holds, written in
// parentheses after the layer's name.
const (
	kindLibrary     = "library"
	kindApplication = "application"
	kindTests       = "tests only"
)

// The values the "may import" column takes.
const (
	importBelow    = "layers below"
	importBelowOwn = "layers below and its own layer"
	importStdOnly  = "the standard library only"
)

// layer is one row of the layer table.
type layer struct {
	row     int    // 1 for the top row
	name    string // "collector"
	kind    string // kindLibrary, kindApplication or kindTests
	pkgs    []string
	own     bool // may import packages of its own row
	stdOnly bool // imports the standard library only
	line    int  // line of the row in architectureDoc
}

func (l *layer) String() string {
	return fmt.Sprintf("layer %q (row %d, %s)", l.name, l.row, l.kind)
}

// exception is a row of the "Temporary exceptions" table: an import that
// breaks the rule and is allowed until it is removed.
type exception struct {
	pkg, imp string
	line     int
}

// TestLayers checks the layer table of docs/architecture.md against the
// import graph of the module's packages (`go list -deps -json ./...`):
//
//   - every package of the module is named in exactly one row, and every
//     package the table names exists;
//   - no package imports, outside its _test.go files, a package of a higher
//     row, or one of its own row unless the row's "may import" cell says
//     "layers below and its own layer";
//   - no library package imports an application or test-helper package,
//     and test helpers are imported by _test.go files only;
//   - a row that may import "the standard library only" imports nothing
//     else;
//   - every temporary exception the document lists is still needed.
//
// Imports made by _test.go files are not checked: they are not part of the
// package a program imports, the go command already rejects the cycles they
// could make, and end-to-end tests legitimately reach up (a sink's tests
// send to the real collector).
func TestLayers(t *testing.T) {
	root := testrepo.Root(t)
	layers, exceptions := readLayerTable(t, filepath.Join(root, architectureDoc))
	pkgs := goList(t, root)

	where := map[string]*layer{} // package (relative path) → its row
	for _, l := range layers {
		for _, p := range l.pkgs {
			if prev, dup := where[p]; dup {
				t.Errorf("%s:%d: `%s` is named in two rows of the layer table, %s and %s: keep it in the row it belongs to and delete it from the other",
					architectureDoc, l.line, p, prev, l)
				continue
			}
			where[p] = l
		}
	}

	var mod []*goPackage // the module's packages, sorted by path
	for _, p := range pkgs.byPath {
		if p.inModule() {
			mod = append(mod, p)
		}
	}
	slices.SortFunc(mod, func(a, b *goPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })

	inModule := map[string]bool{}
	for _, p := range mod {
		rel := rel(p.ImportPath)
		inModule[rel] = true
		if where[rel] == nil {
			t.Errorf("package %s is in no row of the layer table in %s: add `%s` to the packages of the row it belongs to%s",
				p.ImportPath, architectureDoc, rel, nearestRow(rel, where))
		}
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if !inModule[p] {
				t.Errorf("%s:%d: the layer table names `%s` in %s, but the module has no such package (go list ./...): delete it from the row, or correct the path",
					architectureDoc, l.line, p, l)
			}
		}
	}

	allowed := map[[2]string]*exception{}
	used := map[[2]string]bool{}
	for i := range exceptions {
		e := &exceptions[i]
		allowed[[2]string{e.pkg, e.imp}] = e
	}

	for _, p := range mod {
		from := rel(p.ImportPath)
		lf := where[from]
		if lf == nil {
			continue // reported above
		}
		for _, imp := range p.Imports {
			dep := pkgs.byPath[imp]
			if lf.stdOnly && (dep == nil || !dep.Standard) {
				t.Errorf("%s, in %s, imports %s, which is not in the standard library, but the row may import %q: remove the import, or change the row's \"may import\" cell in %s:%d if the rule should change",
					from, lf, imp, importStdOnly, architectureDoc, lf.line)
				continue
			}
			if !isModule(imp) {
				continue
			}
			to := rel(imp)
			lt := where[to]
			if lt == nil {
				continue // reported above
			}
			problem := importProblem(from, lf, to, lt)
			if problem == "" {
				continue
			}
			if e := allowed[[2]string{from, to}]; e != nil {
				used[[2]string{from, to}] = true
				t.Logf("allowed for now by the temporary exception at %s:%d: %s", architectureDoc, e.line, problem)
				continue
			}
			t.Error(problem)
		}
	}

	for _, e := range exceptions {
		if used[[2]string{e.pkg, e.imp}] {
			continue
		}
		p := pkgs.byPath[module+"/"+e.pkg]
		if p != nil && slices.Contains(p.Imports, module+"/"+e.imp) {
			t.Errorf("%s:%d: the temporary exception %s → %s is not needed: the layer table already allows that import; delete the row",
				architectureDoc, e.line, e.pkg, e.imp)
		} else {
			t.Errorf("%s:%d: the temporary exception %s → %s is stale: %s no longer imports %s (outside _test.go files); delete the row",
				architectureDoc, e.line, e.pkg, e.imp, e.pkg, e.imp)
		}
	}
}

// importProblem says what is wrong with package from (in row lf) importing
// package to (in row lt), and what to change; "" when nothing is.
func importProblem(from string, lf *layer, to string, lt *layer) string {
	fix := fmt.Sprintf("or, if the table is what is wrong, move one of the two packages to another row of the layer table in %s", architectureDoc)
	switch {
	case lt.kind == kindTests && lf.kind != kindTests:
		return fmt.Sprintf("%s, in %s, imports the test helper %s, in %s, outside its _test.go files: test helpers are for tests only; move the import into a _test.go file, or move the code %s needs out of the test helper into a package %s may import",
			from, lf, to, lt, from, from)
	case lf.kind == kindLibrary && lt.kind == kindApplication:
		return fmt.Sprintf("%s, in %s, imports %s, in %s: the library must never depend on the application (cmd/loupe and the application packages under internal/); move what %s uses from %s into the library (a package at or below %q) and have both import it, %s",
			from, lf, to, lt, from, to, lf.name, fix)
	case lt.row < lf.row:
		return fmt.Sprintf("%s, in %s, imports %s, in %s, a higher layer: imports point down only; move the code %s needs from %s into %q or a layer below it, %s",
			from, lf, to, lt, from, to, lf.name, fix)
	case lt.row == lf.row && !lf.own:
		return fmt.Sprintf("%s imports %s, both in %s, whose \"may import\" cell (%s:%d) does not allow imports within the layer: remove the import, move one of the packages to another row, or write %q in that cell if the layer should allow it",
			from, to, lf, architectureDoc, lf.line, importBelowOwn)
	}
	return ""
}

// nearestRow suggests a row for a package that is in none: the row of its
// closest parent folder that the table places.
func nearestRow(rel string, where map[string]*layer) string {
	for dir := rel; dir != "." && dir != "/" && dir != ""; {
		dir = filepath.ToSlash(filepath.Dir(dir))
		if l := where[dir]; l != nil {
			return fmt.Sprintf(" (probably %s, beside `%s`)", l, dir)
		}
		for p, l := range where {
			if strings.HasPrefix(p, dir+"/") {
				return fmt.Sprintf(" (probably %s, beside `%s`)", l, p)
			}
		}
	}
	return ""
}

// TestPackageDocs checks that every package of the module with Go files
// has a package comment, the text `go doc` shows first: "Package NAME …",
// or "Command NAME …" for a main package.
func TestPackageDocs(t *testing.T) {
	root := testrepo.Root(t)
	pkgs := goList(t, root)
	for _, p := range pkgs.byPath {
		if !p.inModule() || len(p.GoFiles) == 0 {
			continue
		}
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command " + filepath.Base(p.ImportPath) + " "
		}
		if !strings.HasPrefix(p.Doc, want) {
			t.Errorf("package %s has no package comment beginning %q (go doc shows %q): write one, in doc.go or the package's main file, saying what the package is for",
				p.ImportPath, want, p.Doc)
		}
	}
}

// readLayerTable reads the layer table and the temporary exceptions from
// the "## Layers" section of the architecture document.
func readLayerTable(t *testing.T, path string) ([]*layer, []exception) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, "## Layers")
	if start < 0 {
		t.Fatalf("%s has no \"## Layers\" section, which holds the layer table", architectureDoc)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}

	layerHeader := []string{"layer", "packages", "may import", "what belongs there"}
	rows, at := findTable(lines, start, end, layerHeader)
	if rows == nil {
		t.Fatalf("%s: the \"## Layers\" section has no table with the header | %s |", architectureDoc, strings.Join(layerHeader, " | "))
	}
	nameRE := regexp.MustCompile(`^(.+?) \((` + kindLibrary + `|` + kindApplication + `|` + kindTests + `)\)$`)
	var layers []*layer
	for i, cells := range rows {
		line := at[i]
		m := nameRE.FindStringSubmatch(cells[0])
		if m == nil {
			t.Errorf("%s:%d: the layer cell %q should be a name followed by the kind of its packages in parentheses: (%s), (%s) or (%s)",
				architectureDoc, line, cells[0], kindApplication, kindTests, kindLibrary)
			continue
		}
		l := &layer{row: len(layers) + 1, name: m[1], kind: m[2], line: line}
		pkgs, ok := codeList(cells[1])
		if !ok || len(pkgs) == 0 {
			t.Errorf("%s:%d: the packages cell of layer %q should list package paths relative to the module root, each in backquotes, separated by \", \" (got %q)",
				architectureDoc, line, l.name, cells[1])
		}
		l.pkgs = pkgs
		switch strings.ToLower(cells[2]) {
		case importBelow:
		case importBelowOwn:
			l.own = true
		case importStdOnly:
			l.stdOnly = true
		default:
			t.Errorf("%s:%d: the \"may import\" cell of layer %q is %q; it must be one of %q, %q or %q",
				architectureDoc, line, l.name, cells[2], importBelow, importBelowOwn, importStdOnly)
		}
		layers = append(layers, l)
	}
	if len(layers) == 0 {
		t.Fatalf("%s: the layer table has no rows", architectureDoc)
	}
	if layers[0].pkgs == nil || !slices.Contains(layers[0].pkgs, "cmd/loupe") {
		t.Errorf("%s:%d: the layer table goes from the top (cmd/loupe) down to the bottom (trace); its first row should hold `cmd/loupe`", architectureDoc, layers[0].line)
	}
	if last := layers[len(layers)-1]; !slices.Contains(last.pkgs, "trace") {
		t.Errorf("%s:%d: the layer table goes from the top (cmd/loupe) down to the bottom (trace); its last row should hold `trace`", architectureDoc, last.line)
	}

	var exceptions []exception
	exHeader := []string{"package", "imports", "why it is wrong, and the fix"}
	exRows, exAt := findTable(lines, start, end, exHeader)
	for i, cells := range exRows {
		pkg, ok1 := codeList(cells[0])
		imp, ok2 := codeList(cells[1])
		if !ok1 || !ok2 || len(pkg) != 1 || len(imp) != 1 || strings.TrimSpace(cells[2]) == "" {
			t.Errorf("%s:%d: a temporary exception names one package and one import, each in backquotes, and says why it is wrong and what the fix is", architectureDoc, exAt[i])
			continue
		}
		exceptions = append(exceptions, exception{pkg: pkg[0], imp: imp[0], line: exAt[i]})
	}
	return layers, exceptions
}

// findTable returns the body rows of the first Markdown table within
// lines[start:end] whose header cells are header, split into cells, and the
// 1-based line number of each row.
func findTable(lines []string, start, end int, header []string) (rows [][]string, at []int) {
	for i := start; i < end; i++ {
		if !strings.HasPrefix(lines[i], "|") || !slices.Equal(cells(lines[i]), header) {
			continue
		}
		for j := i + 2; j < end && strings.HasPrefix(lines[j], "|"); j++ {
			c := cells(lines[j])
			for len(c) < len(header) {
				c = append(c, "")
			}
			rows = append(rows, c)
			at = append(at, j+1)
		}
		return rows, at
	}
	return nil, nil
}

// cells splits a Markdown table row into its trimmed cells. A backslash
// escapes a pipe.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case row[i] == '|':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(row[i])
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

// codeList parses "`a`, `b`, `c`" into its items; ok is false when the cell
// holds anything else.
func codeList(cell string) (items []string, ok bool) {
	for _, part := range strings.Split(cell, ",") {
		part = strings.TrimSpace(part)
		if len(part) < 3 || part[0] != '`' || part[len(part)-1] != '`' || strings.Count(part, "`") != 2 {
			return nil, false
		}
		items = append(items, part[1:len(part)-1])
	}
	return items, true
}

// goPackage is what TestLayers and TestPackageDocs read of `go list -json`.
type goPackage struct {
	ImportPath string
	Name       string
	Doc        string
	Standard   bool
	DepOnly    bool
	GoFiles    []string
	Imports    []string // not those of _test.go files
	Module     *struct{ Path string }
}

func (p *goPackage) inModule() bool {
	return !p.DepOnly && !p.Standard && p.Module != nil && p.Module.Path == module
}

type goPackages struct {
	byPath map[string]*goPackage
}

var (
	listOnce sync.Once
	listed   goPackages
	listErr  error
)

// goList runs `go list -e -deps -json ./...` in the repository root once
// per test binary: the module's packages and everything they import. -e
// keeps a package that does not compile (someone's edit in progress) in
// the list, with the imports its files declare.
func goList(t *testing.T, root string) goPackages {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-e", "-deps",
			"-json=ImportPath,Name,Doc,Standard,DepOnly,GoFiles,Imports,Module", "./...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = fmt.Errorf("go list -e -deps -json ./... in %s: %v\n%s", root, err, stderr.Bytes())
			return
		}
		listed.byPath = map[string]*goPackage{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			p := new(goPackage)
			err := dec.Decode(p)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				listErr = fmt.Errorf("reading go list's output: %v", err)
				return
			}
			listed.byPath[p.ImportPath] = p
		}
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

func isModule(path string) bool { return path == module || strings.HasPrefix(path, module+"/") }

func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// TestDecisionsFormat checks docs/decisions.md against the format its
// header states, so that entries stay uniform as they are added:
//
//   - every entry's heading is "## area: title", area a package path or a
//     topic in lower case, and no two headings are the same;
//   - a heading has a blank line before it (a heading glued to the previous
//     entry is not one);
//   - an entry is, in this order: optional "Superseded by: HEADING" or
//     "Superseded in part by: HEADING" paragraphs naming another entry, a
//     "Decision:" paragraph, a "Why:" paragraph, an optional
//     "Alternatives:" paragraph, each possibly followed by paragraphs that
//     continue it; other spellings of the labels (What:, **Why.**,
//     Alternative:) are refused;
//   - no wording about where the work was done instead of why: issue
//     numbers, "the issue", "this branch".
func TestDecisionsFormat(t *testing.T) {
	root := testrepo.Root(t)
	data, err := os.ReadFile(filepath.Join(root, decisionsDoc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")

	type entry struct {
		heading string
		line    int
		paras   []para
	}
	var entries []*entry
	var cur *entry
	var p *para
	inFence := false
	for i, l := range lines {
		n := i + 1
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(l, "## ") {
			if i > 0 && strings.TrimSpace(lines[i-1]) != "" {
				t.Errorf("%s:%d: a heading needs a blank line before it: %q", decisionsDoc, n, l)
			}
			cur = &entry{heading: strings.TrimPrefix(l, "## "), line: n}
			entries = append(entries, cur)
			p = nil
			continue
		}
		if cur == nil {
			continue // the file's header
		}
		if strings.TrimSpace(l) == "" && !inFence {
			p = nil
			continue
		}
		if p == nil {
			cur.paras = append(cur.paras, para{text: l, line: n})
			p = &cur.paras[len(cur.paras)-1]
			continue
		}
		p.text += "\n" + l
	}
	if len(entries) == 0 {
		t.Fatalf("%s has no entries", decisionsDoc)
	}

	headingRE := regexp.MustCompile(`^([a-z][a-z0-9]*(?:/[a-z0-9]+)*): (\S.*)$`)
	index := map[string]int{}
	for i, e := range entries {
		if !headingRE.MatchString(e.heading) {
			t.Errorf("%s:%d: the heading %q should be \"## area: title\", area a package path (store, export/http, cmd/loupe) or a topic (tests, docs, …) in lower case", decisionsDoc, e.line, e.heading)
		}
		if j, dup := index[e.heading]; dup {
			t.Errorf("%s:%d: the heading %q is also at line %d: headings name entries, make it distinct", decisionsDoc, e.line, e.heading, entries[j].line)
		}
		index[e.heading] = i
	}

	const (
		superseded       = "Superseded by: "
		supersededInPart = "Superseded in part by: "
		decision         = "Decision: "
		why              = "Why: "
		alternatives     = "Alternatives: "
	)
	wrongLabel := regexp.MustCompile(`^(\*\*[^*]+\*\*|(What|Alternative|Rejected|Decision|Why|Alternatives|Superseded)[.:]\S|(What|Alternative|Rejected)[:.] |(Decision|Why|Alternatives)\. |Superseded by "|Superseded in part by ")`)
	for i, e := range entries {
		stage := 0 // 0 marks, 1 decision seen, 2 why seen, 3 alternatives seen
		for _, pa := range e.paras {
			text := pa.text
			switch {
			case strings.HasPrefix(text, superseded) || strings.HasPrefix(text, supersededInPart):
				if stage != 0 {
					t.Errorf("%s:%d: in %q, a Superseded paragraph must come first, before Decision:", decisionsDoc, pa.line, e.heading)
				}
				target := strings.TrimPrefix(strings.TrimPrefix(text, superseded), supersededInPart)
				j, ok := index[target]
				switch {
				case !ok:
					t.Errorf("%s:%d: %q names %q, which is not the heading (without \"## \") of an entry: write the newer entry's heading exactly, alone in the paragraph", decisionsDoc, pa.line, e.heading, target)
				case j == i:
					t.Errorf("%s:%d: %q names itself as the entry that supersedes it", decisionsDoc, pa.line, e.heading)
				}
			case strings.HasPrefix(text, decision):
				if stage != 0 {
					t.Errorf("%s:%d: %q has a second Decision: paragraph; an entry has one, continued by paragraphs without a label", decisionsDoc, pa.line, e.heading)
				}
				stage = 1
			case strings.HasPrefix(text, why):
				if stage != 1 {
					t.Errorf("%s:%d: in %q, Why: must follow Decision: and appear once", decisionsDoc, pa.line, e.heading)
				}
				stage = 2
			case strings.HasPrefix(text, alternatives):
				if stage != 2 {
					t.Errorf("%s:%d: in %q, Alternatives: must follow Why: and appear once", decisionsDoc, pa.line, e.heading)
				}
				stage = 3
			case wrongLabel.MatchString(text):
				t.Errorf("%s:%d: in %q, the paragraph begins %q: the labels are written %q, %q, %q, %q and %q", decisionsDoc, pa.line, e.heading,
					firstWords(text), superseded, supersededInPart, decision, why, alternatives)
			case stage == 0:
				t.Errorf("%s:%d: %q must begin with a Decision: paragraph (after any Superseded paragraphs); it begins %q", decisionsDoc, pa.line, e.heading, firstWords(text))
				stage = 1 // one report per entry
			}
		}
		if stage < 2 {
			t.Errorf("%s:%d: %q has no Why: paragraph: every entry says what was decided (Decision:) and why (Why:)", decisionsDoc, e.line, e.heading)
		}
	}

	// Wording that refers to how the work was organised rather than saying
	// the reason itself.
	banned := []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bissues?\s*#?\d+`),
		regexp.MustCompile(`(?i)(^|\s)#\d+\b`),
		regexp.MustCompile(`(?i)\b(the|this|that|an|our) issue\b`),
		regexp.MustCompile(`(?i)\b(this|that|another|other|feature|git|main|working|my|our)\s+branch(es)?\b`),
		regexp.MustCompile(`(?i)\bbranch's scope\b`),
		regexp.MustCompile(`(?i)\b(pull request|another helper|the lead)\b`),
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		for _, re := range banned {
			if m := re.FindString(sc.Text()); m != "" {
				t.Errorf("%s:%d: %q refers to the work's organisation (issues, branches, who owns what), which a reader of the decision cannot see: state the reason itself", decisionsDoc, n, strings.TrimSpace(m))
			}
		}
	}
}

type para struct {
	text string
	line int
}

func firstWords(s string) string {
	s = strings.SplitN(s, "\n", 2)[0]
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
