package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/trace"
)

func TestPipelineBuiltinF1AndExactMatch(t *testing.T) {
	tests := []struct {
		answer, ref string
		em, f1      float64
	}{
		{"The Eiffel Tower", "eiffel tower!", 1, 1},
		{"Paris", "London", 0, 0},
		{"the cat sat", "a cat sat down", 0, 0.8},
		{"", "", 1, 1},
		{"x", "", 0, 0},
		{"go go go", "go", 0, 0.5},
	}
	for _, tt := range tests {
		if got := ExactMatch(tt.answer, tt.ref); got != tt.em {
			t.Errorf("ExactMatch(%q, %q) = %v, want %v", tt.answer, tt.ref, got, tt.em)
		}
		if got := F1(tt.answer, tt.ref); math.Abs(got-tt.f1) > 1e-9 {
			t.Errorf("F1(%q, %q) = %v, want %v", tt.answer, tt.ref, got, tt.f1)
		}
	}
}

func TestPipelineBuiltinEvaluate(t *testing.T) {
	tests := []struct {
		name   string
		args   map[string]any
		score  float64
		reason string
		method string
	}{
		{"reference match", map[string]any{"answer": "Paris.", "reference": "paris"}, 1, ReasonThresholdReached, "reference"},
		{"reference list", map[string]any{"answer": "Paris", "reference": []any{"Lyon", "Paris"}}, 1, ReasonThresholdReached, "reference"},
		{"reference miss", map[string]any{"answer": "Lyon is big", "reference": "Paris"}, 0, ReasonContinueReflection, "reference"},
		{"no improvement", map[string]any{"answer": "Lyon is big", "reference": "Paris", "quality_score": 0.2}, 0, ReasonImprovementFailed, "reference"},
		{"threshold from params", map[string]any{"answer": "x y", "reference": "x y z w", "quality_threshold": 0.5}, 0.6667, ReasonThresholdReached, "reference"},
		{"question coverage", map[string]any{"analysis": "typed languages", "query": "Why use typed languages?"}, 0.71, ReasonContinueReflection, "question_coverage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Evaluator{}.Call(context.Background(), "evaluate", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if out["quality_score"] != tt.score || out["routing_reason"] != tt.reason || out["method"] != tt.method {
				t.Errorf("got score %v reason %v method %v, want %v %v %v", out["quality_score"], out["routing_reason"], out["method"], tt.score, tt.reason, tt.method)
			}
		})
	}
	if _, err := (Evaluator{}).Call(context.Background(), "evaluate", map[string]any{"query": "q"}); !errors.Is(err, ErrMissingArg) {
		t.Errorf("no answer: err = %v, want ErrMissingArg", err)
	}
	if _, err := (Evaluator{}).Call(context.Background(), "grade", nil); err == nil || !strings.Contains(err.Error(), "its tools are evaluate") {
		t.Errorf("unknown tool: err = %v", err)
	}
}

func TestPipelineBuiltinCheckQuality(t *testing.T) {
	tests := []struct {
		name                    string
		args                    map[string]any
		route, decision, reason string
	}{
		{"high", map[string]any{"quality_score": 0.9}, RouteHighQuality, "complete", ReasonThresholdReached},
		{"low", map[string]any{"quality_score": 0.5, "quality_threshold": 0.8}, RouteLowQuality, "continue", ReasonContinueReflection},
		{"max iterations", map[string]any{"quality_score": 0.5, "iteration": 3, "max_iterations": 3}, RouteLowQuality, "complete", ReasonMaxIterationsReached},
		{"scored from text", map[string]any{"analysis": "typed", "topic": "typed languages", "quality_threshold": 0.3}, RouteHighQuality, "complete", ReasonThresholdReached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Router{}.Call(context.Background(), "check_quality", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if out["route"] != tt.route || out["decision"] != tt.decision || out["routing_reason"] != tt.reason {
				t.Errorf("got %v %v %v, want %v %v %v", out["route"], out["decision"], out["routing_reason"], tt.route, tt.decision, tt.reason)
			}
		})
	}
	if _, err := (Router{}).Call(context.Background(), "check_quality", map[string]any{}); !errors.Is(err, ErrMissingArg) {
		t.Errorf("nothing to score: err = %v", err)
	}
}

func TestPipelineBuiltinRetriever(t *testing.T) {
	ctx := context.Background()
	r, err := NewRetriever("")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Call(ctx, "search", map[string]any{"query": "types"}); err == nil || !strings.Contains(err.Error(), "documents_dir") {
		t.Fatalf("empty index: err = %v, want one naming documents_dir", err)
	}
	out, err := r.Call(ctx, "index", map[string]any{"documents_dir": "testdata/docs", "collection": "kb"})
	if err != nil {
		t.Fatal(err)
	}
	if out["indexed"] != 6 { // 2 + 1 + 3 paragraphs; notes.bin skipped
		t.Errorf("indexed %v passages, want 6", out["indexed"])
	}
	for _, tool := range []string{"search", "hybrid_search"} {
		out, err = r.Call(ctx, tool, map[string]any{"query": "Why use static typing?", "top_k": 2, "collection": "kb"})
		if err != nil {
			t.Fatal(err)
		}
		res := out["results"].([]any)
		if len(res) != 2 || out["count"] != 2 {
			t.Fatalf("%s: %d results, want 2: %v", tool, len(res), res)
		}
		if id := res[0].(map[string]any)["id"]; !strings.HasPrefix(id.(string), "typing.md#") {
			t.Errorf("%s: best hit %v, want a passage of typing.md", tool, id)
		}
	}
	if out, _ = r.Call(ctx, "search", map[string]any{"query": "typing", "collection": "other"}); out["count"] != 0 {
		t.Errorf("other collection: %v results, want 0", out["count"])
	}
	if _, err = r.Call(ctx, "search", map[string]any{"query": "typing", "top_k": 0.5, "collection": "kb"}); err == nil || !strings.Contains(err.Error(), "top_k") {
		t.Errorf("bad top_k: err = %v", err)
	}
	if _, err = r.Call(ctx, "search", map[string]any{"query": "the of", "collection": "kb"}); err == nil {
		t.Error("query of stopwords: no error")
	}
	out, err = r.Call(ctx, "get_stats", nil)
	if err != nil || out["total"] != 6 {
		t.Errorf("get_stats = %v, %v", out, err)
	}
}

func TestPipelineBuiltinRetrieverIndexesDocumentsOnFirstSearch(t *testing.T) {
	r, err := NewRetriever("")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out, err := r.Call(context.Background(), "search", map[string]any{"query": "go", "documents": []any{"Go is typed.", map[string]any{"id": "py", "text": "Python is dynamic."}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := out["results"].([]any); len(res) != 1 || res[0].(map[string]any)["id"] != "doc1" {
		t.Errorf("results = %v", res)
	}
	r.Close()
	if _, err := r.Call(context.Background(), "get_stats", nil); err == nil {
		t.Error("call after Close: no error")
	}
}

func TestPipelineBuiltinGeneratorOffline(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, run := tr.Start(context.Background(), "gen", trace.RunOptions{})
	g := NewGenerator(nil)
	out, err := g.Call(ctx, "analyze", map[string]any{"topic": "typed languages", "results": []any{map[string]any{"id": "a", "text": "Static typing catches errors early. More."}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `Analysis of "typed languages": an answer must cover typed and languages. The sources say: Static typing catches errors early.`
	if out["analysis"] != want {
		t.Errorf("analysis = %q, want %q", out["analysis"], want)
	}
	for _, tool := range []string{"draft", "generate", "reflect", "improve", "finalize"} {
		out, err := g.Call(ctx, tool, map[string]any{"topic": "typed languages", "analysis": want, "context": "Types document intent."})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if len(out) != 1 {
			t.Errorf("%s: %v", tool, out)
		}
	}
	if _, err := g.Call(ctx, "reflect", map[string]any{"topic": "x"}); !errors.Is(err, ErrMissingArg) {
		t.Errorf("reflect with no text: err = %v", err)
	}
	run.End(nil, nil)
	if s := run.Stats(); s.ModelCalls != 6 || s.ByModel[OfflineModelName].OutputTokens == 0 {
		t.Errorf("stats = %+v, want 6 traced model calls with usage", s)
	}
}

func TestPipelineBuiltinNew(t *testing.T) {
	for _, n := range Names() {
		s, err := New(n, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Tools()) == 0 {
			t.Errorf("%s has no tools", n)
		}
		s.Close()
	}
	if _, err := New("vectors", Config{}); err == nil || !strings.Contains(err.Error(), "retriever") {
		t.Errorf("New(vectors) err = %v", err)
	}
}

func TestPipelineBuiltinRetrieverDefaultBackend(t *testing.T) {
	ctx := context.Background()
	args := map[string]any{"query": "Why use static typing?", "documents_dir": "testdata/docs"}
	var got [2]any
	for i, backend := range []string{"", "hybrid"} {
		s, err := New("retriever", Config{DefaultBackend: backend})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Call(ctx, "search", args)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = out["results"]
		if backend == "hybrid" {
			want, _ := s.Call(ctx, "hybrid_search", args)
			if fmt.Sprint(want["results"]) != fmt.Sprint(out["results"]) {
				t.Errorf("search with the hybrid backend = %v, want hybrid_search's %v", out["results"], want["results"])
			}
		}
	}
	if fmt.Sprint(got[0]) == fmt.Sprint(got[1]) {
		t.Error("the backend changed nothing")
	}
}
