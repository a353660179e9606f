package pipeline

import (
	"github.com/loupe-dev/loupe/internal/testrepo"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/golden"
)

// TestPipelineGraphGolden draws every real pipeline in both formats and
// compares with testdata/graph (go test -update rewrites them).
func TestPipelineGraphGolden(t *testing.T) {
	for _, tc := range realPipelines {
		t.Run(tc.file, func(t *testing.T) {
			p := parseReal(t, tc.file)
			base := "graph/" + strings.NewReplacer("/", "-", ".yaml", "").Replace(tc.file)
			m := p.Mermaid()
			golden.Check(t, base+".mmd", []byte(m))
			golden.Check(t, base+".dot", []byte(p.DOT()))
			if m != p.Mermaid() {
				t.Error("Mermaid output differs between two calls")
			}
		})
	}
}

// TestPipelineGraphNested draws nested loops, a router list and an empty
// branch (testdata/graph/nested.yaml).
func TestPipelineGraphNested(t *testing.T) {
	p, err := ParseFile("testdata/graph/nested.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if errs := p.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	golden.Check(t, "graph/nested.mmd", []byte(p.Mermaid()))
	golden.Check(t, "graph/nested.dot", []byte(p.DOT()))
}

func TestPipelineGraphQuoting(t *testing.T) {
	src := "servers: {s: x}\npipeline:\n  - branch:\n      router: 'say \"hi\" \\'\n      branches: {a: [s.t]}\n"
	p, err := Parse("q.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := `n1{"say #quot;hi#quot; \"}`; !strings.Contains(p.Mermaid(), want) {
		t.Errorf("Mermaid label not escaped, want %s in:\n%s", want, p.Mermaid())
	}
	if want := `label="say \"hi\" \\"`; !strings.Contains(p.DOT(), want) {
		t.Errorf("DOT label not escaped, want %s in:\n%s", want, p.DOT())
	}
}

// TestPipelineGraphDOTRenders renders every DOT golden file with Graphviz,
// installed by scripts/test.sh (Debian's graphviz). Without it the test
// skips, except under CI=true, where it fails.
func TestPipelineGraphDOTRenders(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		testrepo.Missing(t, "Graphviz's dot is not installed (apt-get install graphviz)")
	}
	files, err := filepath.Glob("testdata/graph/*.dot")
	if err != nil || len(files) == 0 {
		t.Fatalf("no DOT files: %v", err)
	}
	for _, f := range files {
		out, err := exec.Command(dot, "-Tsvg", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "<svg") {
			t.Errorf("dot %s: %v\n%.500s", f, err, out)
		}
	}
}
