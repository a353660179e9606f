package replay_test

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// Traces not written by Loupe's agent runtime (imported from other tools,
// hand-made fixtures) are read and compared without panicking, and are
// refused for replay rather than replayed into a meaningless report.
func TestForeignTraces(t *testing.T) {
	files := []string{
		"../trace/testdata/fixture.jsonl",
		"../testdata/real/agentv/static-trace.json",
		"../testdata/real/agentv/multi-agent.eval.results.jsonl",
		"../testdata/real/omni/session_rag_demo.trace.json",
		"../testdata/real/omni/session_failed_run.trace.json",
		"../testdata/real/fragola/otel-traces.jsonl",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			recs, _, err := traceio.ReadFile(f, "")
			if err != nil {
				t.Fatal(err)
			}
			byTrace := map[trace.TraceID][]trace.Record{}
			for _, r := range recs {
				byTrace[r.TraceID] = append(byTrace[r.TraceID], r)
			}
			for id, rs := range byTrace {
				rec := replay.Read(rs)
				if err := replay.Compare(rec, rec).WriteText(io.Discard); err != nil {
					t.Fatal(err)
				}
				// None of them holds requests as the runtime records them.
				if _, err := replay.Load(rs); err == nil {
					t.Errorf("%s: Load accepted a trace not recorded by Loupe's agent runtime", id)
				}
				if _, err := replay.Run(t.Context(), rec, replay.RunOptions{}); err == nil {
					t.Errorf("%s: Run replayed a trace not recorded by Loupe's agent runtime", id)
				}
			}
		})
	}
}
