package eval

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/golden"
)

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
		golden.CheckFile(t, path, []byte(b.String()))
	}
}
