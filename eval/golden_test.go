package eval

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// TestExplainGolden pins the explanation text of the reference cases in
// both modes. Run `go test ./eval -run Golden -update` after an intended
// change and review the diff.
func TestExplainGolden(t *testing.T) {
	f, runs := loadRef(t)
	for _, mode := range []Mode{ModeDefault, ModeAgentV} {
		res, err := EvaluateFile(context.Background(), f, runs, Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, r := range res {
			b.WriteString(r.Explain())
			b.WriteString("\n")
		}
		path := filepath.Join("testdata", "golden", "explain-"+mode.String()+".txt")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got := b.String(); got != string(want) {
			t.Errorf("%s differs from the golden file; run with -update if intended.\ngot:\n%s", path, got)
		}
	}
}
