package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// goBlocks returns the bodies of the ```go blocks of markdown.
func goBlocks(markdown string) []string {
	var blocks []string
	rest := markdown
	for {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			return blocks
		}
		body, tail, ok := strings.Cut(after, "```")
		if !ok {
			return append(blocks, after)
		}
		blocks = append(blocks, body)
		rest = tail
	}
}

var spaces = regexp.MustCompile(`\s+`)

// codeLines splits Go code into lines with whitespace runs collapsed
// (gofmt aligns comments and indents with tabs; the README may not),
// leaving out blank lines and import declarations, whose paths it returns
// apart.
func codeLines(code string) (lines, imports []string) {
	inImport := false
	for _, l := range strings.Split(code, "\n") {
		l = strings.TrimSpace(spaces.ReplaceAllString(l, " "))
		switch {
		case l == "":
		case l == "import (":
			inImport = true
		case inImport && l == ")":
			inImport = false
		case inImport || strings.HasPrefix(l, "import "):
			if m := regexp.MustCompile(`"([^"]+)"`).FindStringSubmatch(l); m != nil {
				imports = append(imports, m[1])
			}
		default:
			lines = append(lines, l)
		}
	}
	return lines, imports
}

// TestREADMESnippets: every ```go block of README.md and docs/*.md is,
// line for line, the code between "// README:" markers of an Example in
// one of this package's *example_test.go files,
// which go test compiles; the packages it imports are imported there. A
// snippet that does not compile, or that was changed in one place only,
// fails here.
func TestREADMESnippets(t *testing.T) {
	root := testrepo.Root(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var readme []byte
	for _, name := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		readme = append(append(readme, b...), '\n')
	}
	examples, err := filepath.Glob("*example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, name := range examples {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		src = append(append(src, b...), '\n')
	}
	// The marked regions of the examples.
	var regions [][]string
	for _, part := range strings.Split(string(src), "// README: ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		if name == "end" {
			continue
		}
		body, _, _ = strings.Cut(body, "// README: end")
		lines, _ := codeLines(body)
		regions = append(regions, lines)
	}
	_, fileImports := codeLines(string(src))

	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go blocks: has the test lost track of them?")
	}
	used := make([]bool, len(regions))
	for i, b := range blocks {
		lines, imports := codeLines(b)
		found := false
		for j, r := range regions {
			if strings.Join(r, "\n") == strings.Join(lines, "\n") {
				found, used[j] = true, true
				break
			}
		}
		if !found {
			t.Errorf("the go block %d of README.md and docs/*.md is not an Example in internal/readme (copy it into an *example_test.go there, between // README: markers, or fix the drift):\n%s", i+1, b)
		}
		for _, imp := range imports {
			if !strings.Contains(strings.Join(fileImports, "\n"), imp) {
				t.Errorf("the go block %d of README.md and docs/*.md imports %s, which no internal/readme example file does", i+1, imp)
			}
		}
	}
	for j, u := range used {
		if !u {
			t.Errorf("example region %d matches no README block (remove it, or the README lost a snippet):\n%s", j+1, strings.Join(regions[j], "\n"))
		}
	}
}
