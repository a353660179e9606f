package pipeline_test

import (
	"context"
	"testing"

	"github.com/loupe-dev/loupe/pipeline"
)

// BenchmarkPipelineRun runs demo-simple (three generator steps, offline
// model) and demo-rag (FTS5 index of the test documents, search, generate,
// evaluate) end to end, records kept in memory, no sinks.
func BenchmarkPipelineRun(b *testing.B) {
	for _, name := range []string{"demo-simple", "demo-rag"} {
		b.Run(name, func(b *testing.B) {
			p, err := pipeline.Load("../testdata/real/omni/" + name + ".yaml")
			if err != nil {
				b.Fatal(err)
			}
			o := pipeline.RunOptions{Params: offlineParams()}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pipeline.Run(context.Background(), p, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
