package replay_test

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
)

// FuzzRead: no sequence of records makes Read, Load, Compare or a replay
// panic.
func FuzzRead(f *testing.F) {
	if b, err := os.ReadFile("../trace/testdata/fixture.jsonl"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","seq":1,"time":"2026-01-01T00:00:00Z","type":"run.start","name":"x"}
{"v":1,"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdee","seq":2,"time":"2026-01-01T00:00:00Z","type":"model.call","name":"m","iteration":1,"input":{"messages":1,"new":[{"role":"user","content":"hi"}]},"output":{"tool_calls":[{"id":"a","name":"t","input":{}}]}}
{"v":1,"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcded","seq":3,"time":"2026-01-01T00:00:00Z","type":"tool.start","name":"t","iteration":1,"input":{}}
{"v":1,"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","seq":4,"time":"2026-01-01T00:00:00Z","type":"run.end","status":"success","output":"ok"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []trace.Record
		for _, line := range bytes.Split(data, []byte("\n")) {
			if r, err := trace.DecodeRecord(line); err == nil {
				recs = append(recs, r)
			}
		}
		rec := replay.Read(recs)
		_ = replay.Compare(rec, replay.Read(nil)).WriteText(io.Discard)
		if _, err := replay.Load(recs); err == nil {
			if rep, err := replay.Run(t.Context(), rec, replay.RunOptions{}); err == nil {
				_ = rep.WriteText(io.Discard)
			}
		}
	})
}
