package evalrun

import (
	"os"
	"testing"

	"github.com/loupe-dev/loupe/eval"
)

// FuzzCommandOutput feeds arbitrary command output to the reader of
// --command output: it must return a run or an error, never panic, and a
// run must summarize.
func FuzzCommandOutput(f *testing.F) {
	if b, err := os.ReadFile("../testdata/real/agentv/static-trace.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"text": "hi", "trace": [{"type": "tool_call", "id": "1", "name": "a", "input": {"q": 1}}]}`))
	f.Add([]byte(`{"v":1,"trace_id":"b03402200f97ed69f5207a7bbabd696a","span_id":"b02a33239290a234","seq":1,"time":"2024-01-15T09:00:00Z","type":"run.start","name":"x"}`))
	f.Add([]byte("The answer is 42."))
	f.Add([]byte(`{"text": 5}`))
	f.Add([]byte(`[1, 2`))
	f.Add([]byte{})
	c := CaseRef{Case: eval.Case{ID: "case/1", Input: "q"}}
	f.Fuzz(func(t *testing.T, out []byte) {
		run, err := runFromOutput(out, c, 0)
		if err != nil {
			if run != nil {
				t.Fatal("run and error both returned")
			}
			return
		}
		if run == nil {
			t.Fatal("no run and no error")
		}
		_ = Summarize(run.Trajectory)
	})
}
