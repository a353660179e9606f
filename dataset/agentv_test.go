package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/golden"
)

func loadCases(t *testing.T) []Case {
	t.Helper()
	b, err := os.ReadFile("testdata/agentv/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []Case
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if err := CheckCases(cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestExportGolden pins the AgentV eval file a dataset exports as, and
// checks that importing it gives the same cases back.
func TestExportGolden(t *testing.T) {
	cases := loadCases(t)
	var buf bytes.Buffer
	if err := Export(&buf, "Loupe dataset weather@1", cases); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "agentv/export.eval.yaml", buf.Bytes())
	back, err := Import("export.eval.yaml", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalize(t, back), normalize(t, cases)) {
		t.Fatalf("import(export(cases)) differs:\n got %+v\nwant %+v", back, cases)
	}
}

// normalize makes cases comparable across a YAML round trip: numbers
// become float64 and empty lists nil, as through JSON.
func normalize(t *testing.T, cases []Case) []Case {
	b, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	var out []Case
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// agentvVerdicts are the verdicts AgentV 4.42.4 gave each case of
// testdata/agentv/export.eval.yaml graded against
// testdata/agentv/transcript.jsonl, observed with the real CLI:
//
//	scripts/agentv-dataset-ref.sh
//
// (npx agentv@4.42.4 eval run export.eval.yaml --transcript
// transcript.jsonl; a test passes at score >= 0.8). The export must run
// under agentv as it runs under loupe eval.
var agentvVerdicts = map[string]struct {
	score float64
	pass  bool
}{
	"weather-pass":         {1, true},
	"weather-missing-call": {0.5, false},
	"weather-wrong-arg":    {0.5, false},
	"search-exact":         {1, true},
	"search-fields":        {1, true},
	"answer-only":          {1, true},
	"answer-wrong":         {0, false},
}

// TestExportGradesLikeAgentV grades the exported file against the
// transcript with loupe's evaluation, as `loupe eval --compat agentv` and
// plain `loupe eval` do, and holds the verdicts (and AgentV-mode scores)
// to what AgentV gave.
func TestExportGradesLikeAgentV(t *testing.T) {
	path := filepath.Join("testdata", "agentv", "export.eval.yaml")
	for _, mode := range []eval.LoadMode{eval.LoadAgentV, eval.LoadDefault} {
		f, err := eval.ParseFileMode(path, mode)
		if err != nil {
			t.Fatal(err)
		}
		opts := eval.Options{}
		if mode == eval.LoadAgentV {
			opts.Mode = eval.ModeAgentV
		}
		rn := &evalrun.Runner{Target: evalrun.TranscriptTarget(filepath.Join("testdata", "agentv", "transcript.jsonl")), Options: opts}
		rep, err := rn.Run(context.Background(), []*eval.File{f})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != len(agentvVerdicts) {
			t.Fatalf("%d results, want %d", len(rep.Results), len(agentvVerdicts))
		}
		for _, r := range rep.Results {
			want, ok := agentvVerdicts[r.Case.ID]
			if !ok {
				t.Errorf("case %s has no AgentV reference", r.Case.ID)
				continue
			}
			if got := r.Result.Verdict == eval.Pass; got != want.pass {
				t.Errorf("%s: %s passes=%v (score %.4f), AgentV passes=%v (score %.4f)", mode, r.Case.ID, got, r.Result.Score, want.pass, want.score)
			}
			if mode == eval.LoadAgentV && abs(r.Result.Score-want.score) > 1e-3 {
				t.Errorf("agentv mode: %s score %.4f, AgentV %.4f", r.Case.ID, r.Result.Score, want.score)
			}
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
