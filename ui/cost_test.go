package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/trace"
)

// TestUnknownCost: runs whose model calls have no price show their cost as
// "$… + ?" or "unknown" in the runs list and on the run page, never $0 or
// blank.
func TestUnknownCost(t *testing.T) {
	e := newEnv(t)
	run := func(name string, priced bool) trace.TraceID {
		tr := trace.New(trace.Options{})
		_, ec := tr.Start(context.Background(), name, trace.RunOptions{})
		if priced {
			ec.ModelCall(trace.ModelCall{Model: "gpt-4o", Usage: trace.Usage{InputTokens: 10, CostUSD: 0.25}, Duration: time.Millisecond})
		}
		ec.ModelCall(trace.ModelCall{Model: "mystery", Usage: trace.Usage{InputTokens: 10, CostUnknown: true}, Duration: time.Millisecond})
		ec.End(nil, nil)
		e.append(t, ec.Records())
		return ec.Records()[0].TraceID
	}
	partly, none := run("partly", true), run("unpriced", false)
	tb := newTab(t, 45*time.Second)
	tb.do(t, "runs page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#runs tr[data-trace="`+none.String()+`"]`))
	for id, want := range map[trace.TraceID]string{partly: "$0.250 + ?", none: "unknown"} {
		cells := eval[[]string](t, tb, `[...document.querySelectorAll('#runs tr[data-trace="`+id.String()+`"] td')].map(td => td.innerText)`)
		if len(cells) < 8 || cells[7] != want {
			t.Errorf("runs row %q: cost cell in %q, want %q", id, cells, want)
		}
	}
	tb.do(t, "run page", chromedp.Navigate(e.ts.URL+"/#/run/"+none.String()), waitLoaded(`#tree .row.sel`))
	if head := eval[string](t, tb, `document.querySelector('.run-head').innerText`); !strings.Contains(head, "tokens · unknown") {
		t.Errorf("run header %q does not say the cost is unknown", head)
	}
	tb.noConsoleErrors(t)
}
