package ui_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/agent"
	evalpkg "github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/evalcli"
	"github.com/loupe-dev/loupe/llm/scripted"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/ui"
)

// The scripted models of the test: the agent that failed in production
// (it searches for the wrong thing and runs out of turns), the fixed one,
// and a later change that breaks it again.
const (
	failedScript = "model: support\nturns:\n  - tool_calls: [{name: search, input: {q: parcel}}]\n"
	goodScript   = "model: support\nturns:\n  - tool_calls: [{name: search, input: {q: parcel 42}}]\n  - tool_calls: [{name: fetch, input: {id: 42}}]\n  - answer: Parcel 42 arrives tomorrow.\n"
	brokenScript = "model: support\nturns:\n  - tool_calls: [{name: search, input: {q: parcel 42}}]\n  - answer: I could not find it.\n"
)

// TestDatasetsAndExperiments is the quality loop in the browser: a failed
// run is added to a dataset from the run view with its expected
// trajectory corrected, experiments run the dataset before and after the
// scripted model changes (loupe eval --dataset, on the same store), the
// experiments page compares them and shows the regression, and its row
// opens both runs side by side with the first divergence marked.
func TestDatasetsAndExperiments(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "loupe.db")
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), MaxValueBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); ts.Close(); st.Close() })

	// The failed run: a real agent loop on a scripted model.
	script := map[string]string{}
	for name, body := range map[string]string{"failed": failedScript, "good": goodScript, "broken": brokenScript} {
		script[name] = filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(script[name], []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scripted.Load(script["failed"])
	if err != nil {
		t.Fatal(err)
	}
	target := evalrun.ModelTarget("support-v0", "", func() (agent.Model, error) { return s.NewModel(), nil })
	run, err := target.Run(ctx, evalrun.CaseRef{Case: evalpkg.Case{ID: "parcel", Input: "Where is my parcel 42?"}})
	if err != nil || run.Failure == nil {
		t.Fatalf("the failed run: %v, failure %v", err, run)
	}
	if _, err := st.Append(ctx, run.Records); err != nil {
		t.Fatal(err)
	}
	id := run.TraceID.String()

	tb := newTab(t, 90*time.Second)
	tb.do(t, "the failed run", chromedp.Navigate(ts.URL+"/#/run/"+id), waitLoaded(`#add-to-dataset`))
	tb.do(t, "add to dataset", chromedp.Click(chromedp.CSS(`#add-to-dataset`)), waitLoaded(`#dataset-form textarea`))
	pre := eval[string](t, tb, `document.querySelector('#dataset-form textarea').value`)
	if err := hasText(pre, `"tool": "search"`, `"q": "parcel"`, `"mode": "in_order"`); err != nil {
		t.Fatalf("the pre-filled trajectory: %v", err)
	}
	fixed := `{"mode": "in_order", "args_match": "superset", "expected": [{"tool": "search", "args": {"q": "parcel 42"}}, {"tool": "fetch", "args": {"id": 42}}]}`
	tb.screenshot(t, "add-to-dataset")
	tb.do(t, "save the case",
		chromedp.SetValue(chromedp.CSS(`#dataset-form input[name=dataset]`), "support"),
		chromedp.SetValue(chromedp.CSS(`#dataset-form input[name=criteria]`), "finds parcel 42 and fetches it"),
		chromedp.SetValue(chromedp.CSS(`#dataset-form textarea`), fixed),
		chromedp.Click(chromedp.CSS(`#dataset-save`)), waitLoaded(`#dataset-saved`))
	if got := eval[string](t, tb, `document.querySelector('#dataset-form').dataset.saved`); got != "support@1" {
		t.Fatalf("saved as %q", got)
	}

	// Experiments before and after the model changes, as a CI job runs
	// them: loupe eval --dataset against the same store file.
	for _, x := range []struct{ name, script string }{{"before", "good"}, {"after", "broken"}} {
		var out, errb bytes.Buffer
		code, err := evalcli.Execute(ctx, evalcli.Config{Dataset: "support", Model: "scripted:" + script[x.script], Experiment: x.name, DB: db,
			OpenStore: func(ctx context.Context, dsn string) (store.Store, error) { return sqlite.Open(ctx, dsn) }}, &out, &errb)
		if err != nil || !strings.Contains(errb.String(), "experiment "+x.name+" stored") {
			t.Fatalf("experiment %s: %d %v\n%s\n%s", x.name, code, err, out.String(), errb.String())
		}
	}

	tb.do(t, "datasets", chromedp.Navigate(ts.URL+"/#/datasets"), waitLoaded(`#datasets tr[data-dataset="support"] a`))
	tb.do(t, "dataset", chromedp.Click(chromedp.CSS(`#datasets tr[data-dataset="support"] a`)), waitLoaded(`#cases .case`))
	cases := eval[string](t, tb, `document.querySelector('#cases').innerText`)
	if err := hasText(cases, "Where is my parcel 42?", "finds parcel 42 and fetches it", "search", "fetch", "parcel 42"); err != nil {
		t.Errorf("dataset cases: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('#versions tr[data-version]').length`); n != 1 {
		t.Errorf("%d versions, want 1", n)
	}
	tb.screenshot(t, "dataset")

	// A case's text is shown as text, whatever it holds.
	hostile := `{"cases":[{"id":"x","input":"<img src=x onerror=\"window.pwned=1\">","criteria":"</div><script>window.pwned=2</script>"}]}`
	resp, err := http.Post(ts.URL+"/api/v1/datasets/hostile/cases", "application/json", strings.NewReader(hostile))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("hostile case: %v %v", err, resp)
	}
	resp.Body.Close()
	tb.do(t, "hostile dataset", chromedp.Navigate(ts.URL+"/#/dataset/hostile"), waitLoaded(`#cases .case[data-case="x"]`))
	if n := eval[int](t, tb, `document.querySelectorAll('#cases img, #cases script').length + (window.pwned ? 100 : 0)`); n != 0 {
		t.Errorf("a case's text became markup (%d)", n)
	}
	if err := hasText(eval[string](t, tb, `document.querySelector('#cases').innerText`), `<img src=x onerror="window.pwned=1">`, "</div><script>"); err != nil {
		t.Errorf("hostile text: %v", err)
	}

	tb.do(t, "experiments", chromedp.Navigate(ts.URL+"/#/experiments"), waitLoaded(`#experiments tr[data-experiment="after"]`))
	tb.screenshot(t, "experiments")
	tb.do(t, "compare", chromedp.SetValue(chromedp.CSS(`#compare-a`), "before"), chromedp.SetValue(chromedp.CSS(`#compare-b`), "after"),
		chromedp.Click(chromedp.CSS(`#compare-go`)), waitLoaded(`#compare-rows tbody tr`))
	if got := eval[string](t, tb, `document.querySelector('#regressions').innerText`); got != "1 regression(s)" {
		t.Errorf("regressions badge %q", got)
	}
	row := eval[string](t, tb, `document.querySelector('#compare-rows tbody tr').innerText`)
	if err := hasText(row, "regression", "pass", "fail"); err != nil {
		t.Errorf("first row: %v", err)
	}
	if err := hasText(eval[string](t, tb, `document.querySelector('#totals').innerText`), "100.0% (1/1)", "0.0% (0/1)", "-100.0 pts"); err != nil {
		t.Errorf("totals: %v", err)
	}
	tb.screenshot(t, "compare")
	tb.do(t, "both runs", chromedp.Click(chromedp.CSS(`#compare-rows tbody tr[data-change="regression"]`)), waitLoaded(`#compare-steps tr.diverged`))
	if err := hasText(eval[string](t, tb, `document.querySelector('#compare-divergence').innerText`), "First divergence"); err != nil {
		t.Errorf("divergence: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('#compare-steps tr.diverged td.cmp-call, #compare-steps tr.diverged td.cmp-none').length`); n != 2 {
		t.Errorf("the diverged row has %d cells of calls, want A's and B's", n)
	}
	links := eval[int](t, tb, `document.querySelectorAll('#compare-a-link[href^="#/run/"], #compare-b-link[href^="#/run/"]').length`)
	if links != 2 {
		t.Errorf("%d links to the two runs, want 2", links)
	}
	tb.screenshot(t, "compare-runs")
	tb.noConsoleErrors(t)
}
