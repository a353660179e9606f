package pipeline

import (
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
