package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/internal/demo"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/trace"
)

// demoRecords runs the demo agent and returns its records.
func demoRecords(t *testing.T) []trace.Record {
	t.Helper()
	res, err := demo.Run(context.Background(), trace.New(trace.Options{}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return res.Records
}

func TestReplayDemo(t *testing.T) {
	rec, err := replay.Load(demoRecords(t))
	if err != nil {
		t.Fatal(err)
	}
	if rec.System == "" || len(rec.Tools) != 4 || !rec.DescribedTools {
		t.Fatalf("recording: system %q, %d tools, described %v", rec.System, len(rec.Tools), rec.DescribedTools)
	}
	rep, err := replay.Run(context.Background(), rec, replay.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil {
		t.Fatalf("the demo run diverged on replay:\n%v", rep.Divergence)
	}
	if rep.Stats.ModelCalls != 5 || rep.Stats.ToolCalls != 5 {
		t.Errorf("stats %+v, want 5 model calls and 5 tool calls from the recording", rep.Stats)
	}
	if rep.Answer != rec.Answer || !strings.Contains(rep.Answer, "409.8") {
		t.Errorf("answer %q, recorded %q", rep.Answer, rec.Answer)
	}
}
