package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loupe-dev/loupe/agent"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/replay"
	"github.com/loupe-dev/loupe/store"
	_ "github.com/loupe-dev/loupe/store/backends"
	"github.com/loupe-dev/loupe/trace"
)

// The live model of the branches: it asks for one recorded call (add
// 3+7, as step 2 did), one the recording never made, then answers.
const liveScript = `
model: live-model
turns:
  - tool_calls:
      - {name: add, input: {a: 3, b: 7}}
      - {name: add, input: {a: 10, b: 10}}
    usage: {input_tokens: 300, output_tokens: 15}
  - answer: Branched.
    usage: {input_tokens: 400, output_tokens: 5}
`

// spy records the requests a model is asked.
type spy struct {
	agent.Model
	mu   sync.Mutex
	reqs []agent.Request
}

func (s *spy) Generate(ctx context.Context, req agent.Request) (agent.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, agent.Request{Messages: slices.Clone(req.Messages), Tools: req.Tools})
	s.mu.Unlock()
	return s.Model.Generate(ctx, req)
}

// storeWithRun records the scripted run into a new SQLite store.
func storeWithRun(t *testing.T) (store.Store, trace.TraceID) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "loupe.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tr := trace.New(trace.Options{Sinks: []trace.Sink{store.NewSink(st)}, Dispatch: trace.DispatchOptions{OnFull: trace.Block}})
	s, err := scripted.Parse([]byte(script), "script.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := (&agent.Executor{Name: "adder", Tracer: tr}).Run(ctx, &agent.ReAct{Model: s.NewModel(), System: system,
		Tools: agent.NewToolbox(addTool("Adds two numbers."), lookupTool())}, "Add 1+2 and 3+4, then the results.")
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return st, res.TraceID
}

func TestBranchStoredAndLinked(t *testing.T) {
	ctx := context.Background()
	st, orig := storeWithRun(t)
	s, err := scripted.Parse([]byte(liveScript), "live.yaml")
	if err != nil {
		t.Fatal(err)
	}
	live := &spy{Model: s.NewModel()}
	prompt := "You add numbers, and check them."
	rep, err := replay.RunStored(ctx, st, orig.String()[:8], replay.RunOptions{
		Options: replay.Options{FromStep: 2, Live: live, System: &prompt}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil {
		t.Fatalf("the replayed step diverged:\n%v", rep.Divergence)
	}
	if rep.Answer != "Branched." || rep.Termination != "success" {
		t.Errorf("answer %q, termination %s", rep.Answer, rep.Termination)
	}
	// Step 1 from the recording (a model call and its three tool calls),
	// then the live model's two calls, one of whose tool calls was
	// recorded and one not.
	want := replay.Stats{ModelCalls: 1, ToolCalls: 4, LiveModelCalls: 2, Unanswered: []string{`step 2: add {"a":10,"b":10}`}}
	if got := rep.Stats; got.ModelCalls != want.ModelCalls || got.ToolCalls != want.ToolCalls ||
		got.LiveModelCalls != want.LiveModelCalls || !slices.Equal(got.Unanswered, want.Unanswered) {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	// The live model saw the new system prompt and the recorded step 1.
	if len(live.reqs) != 2 || live.reqs[0].Messages[0].Content != prompt || len(live.reqs[0].Messages) != 6 {
		t.Fatalf("live requests %+v", live.reqs)
	}
	// The new run is stored, tagged with the original and the step.
	if rep.Trace.IsZero() {
		t.Fatal("the branch was not traced")
	}
	tr, err := st.Trace(ctx, rep.Trace)
	if err != nil {
		t.Fatal(err)
	}
	wantTags := []string{replay.TagFromStep + "2", replay.TagOf + orig.String()}
	if !slices.Equal(tr.Summary.Tags, wantTags) {
		t.Errorf("tags %q, want %q", tr.Summary.Tags, wantTags)
	}
	if got := tr.Summary.Models; !slices.Equal(got, []string{"live-model", "scripted-test"}) {
		t.Errorf("models %q", got)
	}
	// The unanswered tool call is a tool error the live model saw.
	var errs []string
	for _, r := range tr.Records {
		if r.Type == trace.TypeToolError && r.Iteration == 2 {
			errs = append(errs, r.Error)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "the recording has no result for add") {
		t.Errorf("step 2 tool errors %q", errs)
	}

	// traces diff of the original and the branch.
	c, err := replay.CompareStored(ctx, st, orig.String(), rep.Trace.String()[:6])
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Divergence; d == nil || d.Step != 2 || d.Call != "model call 2" {
		t.Fatalf("divergence %+v, want at step 2, model call 2", d)
	}
	// The ids are random: the golden file has fixed ones.
	c.A.TraceID, c.B.TraceID = trace.TraceID{0xaa, 1}, trace.TraceID{0xbb, 2}
	c.B.Tags = []string{replay.TagFromStep + "2", replay.TagOf + c.A.TraceID.String()}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_branch.txt", text.Bytes())
	var js bytes.Buffer
	if err := c.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Steps []struct {
			Step int `json:"step"`
			Rows []struct {
				Diverged bool `json:"diverged"`
			} `json:"rows"`
		} `json:"steps"`
		Divergence *replay.Divergence `json:"divergence"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Steps) != 3 || !back.Steps[1].Rows[0].Diverged || back.Divergence.Kind != replay.DivergedMessages {
		t.Errorf("diff JSON (%v):\n%s", err, js.String())
	}
}

func TestBranchNeedsLiveModel(t *testing.T) {
	rec := load(t)
	if _, err := replay.New(rec, replay.Options{FromStep: 2}); err == nil || !strings.Contains(err.Error(), "needs a Live model") {
		t.Errorf("FromStep without Live: %v", err)
	}
}

func TestCompareSame(t *testing.T) {
	a, b := load(t), load(t)
	a.TraceID, b.TraceID = trace.TraceID{0xaa, 1}, trace.TraceID{0xbb, 2}
	c := replay.Compare(a, b)
	if c.Divergence != nil {
		t.Fatalf("two runs of the same script differ: %v", c.Divergence)
	}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_same.txt", text.Bytes())
}
