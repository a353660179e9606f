package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loupe-dev/loupe/store"
)

// TestAnnotateByKeyboard annotates a run and a span of it by keyboard
// (+, a, c, -) and with the form of a configured score, checks the scores
// reached the store through the API and show in the run view, then sees
// them as a column of the runs list, as a filter, and on the dashboard.
func TestAnnotateByKeyboard(t *testing.T) {
	e := newEnv(t)
	id := demoTrace(t, e)
	ctx := context.Background()
	lo, hi := 0.0, 1.0
	if err := store.PutScoreConfig(ctx, e.st.(store.Settings), store.ScoreConfig{Name: "helpfulness", Kind: store.ScoreNumeric, Min: &lo, Max: &hi, Description: "did it help"}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, 60*time.Second)
	tb.do(t, "run page", chromedp.Navigate(e.ts.URL+"/#/run/"+id.String()), waitLoaded(`#annotate[data-loaded="true"]`))
	if n := eval[string](t, tb, `document.querySelector('#annotate').dataset.count`); n != "0" {
		t.Fatalf("a fresh run shows %s annotations", n)
	}
	// + on the tree: thumbs up for the whole run.
	tb.do(t, "thumbs up", chromedp.Focus(chromedp.CSS(`#tree`)), chromedp.KeyEvent("+"), waitLoaded(`#annotate[data-added="1"] #annotations-body tr`))
	// Down to a span, a to annotate it, c to write a comment, Escape back
	// to the tree, - for thumbs down.
	tb.do(t, "thumbs down on a span",
		chromedp.Focus(chromedp.CSS(`#tree`)), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent("a"), chromedp.KeyEvent("c"))
	if f := eval[string](t, tb, `document.activeElement.id`); f != "annotate-comment" {
		t.Fatalf("after c the focus is on %q, want the comment", f)
	}
	span := eval[string](t, tb, `document.querySelector('#tree .row.sel').dataset.span`)
	if tgt := eval[string](t, tb, `document.querySelector('#annotate-target').dataset.span`); tgt != span {
		t.Fatalf("after a the target is span %q, want the selected %q", tgt, span)
	}
	tb.do(t, "comment", chromedp.KeyEvent("wrong tool <b>here</b>"), chromedp.KeyEvent(kb.Escape))
	if f := eval[string](t, tb, `document.activeElement.id`); f != "tree" {
		t.Fatalf("after Escape the focus is on %q, want the tree", f)
	}
	tb.do(t, "minus", chromedp.KeyEvent("-"), waitLoaded(`#annotate[data-added="2"]`))
	// The configured score, with the mouse.
	tb.do(t, "helpfulness", chromedp.SendKeys(chromedp.CSS(`#annotate-value input[name=value]`), "0.75"),
		chromedp.Click(chromedp.CSS(`#annotate-give`)), waitLoaded(`#annotate[data-added="3"]`))
	tb.screenshot(t, "annotate")

	// Stored: read back through the API.
	resp, err := http.Get(e.ts.URL + "/api/v1/scores?trace=" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	var page store.ScorePage
	err = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/scores: %d, %v", resp.StatusCode, err)
	}
	byName := map[string][]store.Score{}
	for _, s := range page.Scores {
		if s.TraceID != id {
			t.Errorf("a score of another trace: %+v", s)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	thumbs := byName["thumbs"]
	if len(page.Scores) != 3 || len(thumbs) != 2 || len(byName["helpfulness"]) != 1 || byName["helpfulness"][0].Value != 0.75 {
		t.Fatalf("stored scores: %+v", page.Scores)
	}
	down, up := thumbs[0], thumbs[1] // newest first
	if down.Value != 0 || down.SpanID.String() != span || down.Comment != "wrong tool <b>here</b>" || down.Source != store.SourceHuman || down.Kind != store.ScoreBoolean {
		t.Errorf("thumbs down stored as %+v", down)
	}
	if up.Value != 1 || !up.SpanID.IsZero() || up.Comment != "" {
		t.Errorf("thumbs up stored as %+v", up)
	}
	// Shown in the run view, the comment as text.
	shown := eval[string](t, tb, `document.querySelector('#annotations').innerText`)
	if err := hasText(shown, "thumbs", "true", "false", "wrong tool <b>here</b>", "span "+span, "helpfulness", "0.75", "human"); err != nil {
		t.Errorf("annotations: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('#annotations b').length`); n != 0 {
		t.Error("a comment was parsed as HTML")
	}

	// The runs list: thumbs as a column, and a filter by score.
	tb.do(t, "runs", chromedp.Navigate(e.ts.URL+"/#/"), waitLoaded(`#app[data-loaded="true"] #runs tr`),
		chromedp.SetValue(chromedp.CSS(`#score-columns`), "thumbs, helpfulness"))
	eval[bool](t, tb, `document.querySelector('#score-columns').dispatchEvent(new Event('change'))`)
	tb.do(t, "score columns", waitLoaded(`#runs[data-scores="filled"] td.score[data-score="helpfulness"]`))
	cells := eval[[]string](t, tb, `[...document.querySelectorAll('#runs td.score')].map(c => c.textContent)`)
	if strings.Join(cells, "|") != "50% true (2)|0.75" {
		t.Errorf("score cells %q, want 50%% true (2) and 0.75", cells)
	}
	tb.do(t, "filter", chromedp.Navigate(e.ts.URL+"/#/runs?score=helpfulness%3E0.9"), waitLoaded(`#empty`))
	tb.do(t, "filter", chromedp.Navigate(e.ts.URL+"/#/runs?score=helpfulness%3E%3D0.7"), waitLoaded(`#runs tr[data-trace="`+id.String()+`"]`))

	// The dashboard: each score's distribution, and its trend.
	tb.do(t, "dashboard", chromedp.Navigate(e.ts.URL+"/#/dashboard?range=1h"), waitLoaded(`#app[data-loaded="true"] .score-chart[data-score="thumbs"]`))
	charts := eval[string](t, tb, `document.querySelector('#charts').textContent`)
	if err := hasText(charts, "Score helpfulness (numeric): 1 scores", "Score thumbs (boolean): 2 scores", "1 (50%)", "Mean over time"); err != nil {
		t.Errorf("score charts: %v", err)
	}
	if n := eval[int](t, tb, `document.querySelectorAll('.score-chart svg.trend circle').length`); n < 2 {
		t.Errorf("%d trend points, want one per score name at least", n)
	}
	tb.screenshot(t, "dashboard-scores")
	tb.noConsoleErrors(t)
}
