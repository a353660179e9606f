package ui_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/domdebugger"
	"github.com/chromedp/cdproto/heapprofiler"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/trace"
)

// TestRunPageDoesNotLeak goes from run to run many times, as a user
// clicking through runs does, and checks that leaving a run page leaves
// nothing of it behind: the listeners on window and document stay as
// many as after the first visits, and the JavaScript heap (after a forced
// garbage collection) does not grow with the visits. A listener left on
// window keeps its run page alive, the whole trace included, so a leak
// shows in both.
func TestRunPageDoesNotLeak(t *testing.T) {
	e := newEnv(t)
	// Runs big enough that keeping one alive shows in the heap: 500 tool
	// calls each, with inputs and outputs.
	type run struct {
		id   trace.TraceID
		root trace.SpanID
	}
	var runs []run
	for r := range 3 {
		b := newBuilder()
		root := trace.NewSpanID()
		name := fmt.Sprintf("run-%d", r)
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: name})
		for i := range 500 {
			s := trace.NewSpanID()
			b.rec(trace.Record{SpanID: s, ParentID: root, Type: trace.TypeToolStart, Name: "search",
				Input: trace.Value(fmt.Sprintf(`{"query":%q,"i":%d}`, strings.Repeat("q", 100), i))})
			b.rec(trace.Record{SpanID: s, ParentID: root, Type: trace.TypeToolEnd, Name: "search", Duration: time.Millisecond,
				Output: trace.Value(fmt.Sprintf(`{"hits":%q}`, strings.Repeat("h", 200)))})
		}
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: name, Status: "success", Duration: time.Second})
		e.append(t, b.recs)
		runs = append(runs, run{b.id, root})
	}

	tb := newTab(t, 120*time.Second)
	tb.do(t, "runs page", chromedp.Navigate(e.ts.URL+"/"), waitLoaded(`#runs tbody tr`))
	visits := 0
	visit := func(n int) {
		t.Helper()
		for range n {
			r := runs[visits%len(runs)]
			visits++
			// A hash change, as following a link does: the same document,
			// the router replacing the page.
			tb.do(t, fmt.Sprintf("visit %d", visits),
				chromedp.Evaluate[chromedp.Void](`location.hash = '#/run/`+r.id.String()+`'`),
				waitLoaded(`#tree .row.sel[data-span="`+r.root.String()+`"]`))
		}
	}

	// Every run twice first, so that what the first visits make once
	// (compiled code, caches) is there before the counts are taken.
	visit(2 * len(runs))
	winBefore, docBefore := listeners(t, tb, "window"), listeners(t, tb, "document")
	heapBefore := heapUsed(t, tb)

	const more = 30
	visit(more)
	winAfter, docAfter := listeners(t, tb, "window"), listeners(t, tb, "document")
	heapAfter := heapUsed(t, tb)
	t.Logf("after %d more visits: window listeners %v → %v, document listeners %v → %v, heap %.1f → %.1f MB",
		more, winBefore, winAfter, docBefore, docAfter, heapBefore/1e6, heapAfter/1e6)

	if !maps.Equal(winBefore, winAfter) {
		t.Errorf("listeners on window changed over %d visits of run pages: %v, then %v", more, winBefore, winAfter)
	}
	if !maps.Equal(docBefore, docAfter) {
		t.Errorf("listeners on document changed over %d visits of run pages: %v, then %v", more, docBefore, docAfter)
	}
	// One run page alive costs about 0.5 MB here (its records, the
	// model, the DOM it built): a page kept per visit adds 15 MB. 2 MB
	// leaves room for what V8 keeps on its own.
	if grown := heapAfter - heapBefore; grown > 2e6 {
		t.Errorf("the JavaScript heap grew by %.1f MB over %d visits of run pages (%.1f → %.1f MB): the pages left are kept alive",
			grown/1e6, more, heapBefore/1e6, heapAfter/1e6)
	}
	tb.noConsoleErrors(t)
}

// listeners returns the event listeners on the object the JavaScript
// expression obj evaluates to in tb's page, counted by event type
// (DOMDebugger.getEventListeners, as DevTools shows them).
func listeners(t *testing.T, tb *tab, obj string) map[string]int {
	t.Helper()
	count, err := chromedp.Run(tb.ctx, func(ctx context.Context, tg *chromedp.Target) (map[string]int, error) {
		const group = "loupe-listeners"
		res, err := cdp.Call(ctx, tg, runtime.Evaluate, runtime.EvaluateParams{Expression: obj, ObjectGroup: group})
		if err != nil {
			return nil, err
		}
		if res.ExceptionDetails != nil || res.Result == nil || res.Result.ObjectID == "" {
			return nil, fmt.Errorf("%s is not an object in the page", obj)
		}
		defer cdp.Call(ctx, tg, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: group})
		ls, err := cdp.Call(ctx, tg, domdebugger.GetEventListeners, domdebugger.GetEventListenersParams{ObjectID: res.Result.ObjectID})
		if err != nil {
			return nil, err
		}
		count := map[string]int{}
		for _, l := range ls.Listeners {
			count[l.Type]++
		}
		return count, nil
	})
	if err != nil {
		t.Fatalf("listeners on %s: %v", obj, err)
	}
	return count
}

// heapUsed collects the garbage of tb's page and returns the bytes of
// JavaScript heap still in use (Runtime.getHeapUsage).
func heapUsed(t *testing.T, tb *tab) float64 {
	t.Helper()
	used, err := chromedp.Run(tb.ctx, func(ctx context.Context, tg *chromedp.Target) (float64, error) {
		// Twice: what the first collection finalizes, the second frees.
		for range 2 {
			if _, err := cdp.Call(ctx, tg, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
				return 0, err
			}
		}
		u, err := cdp.Call(ctx, tg, runtime.GetHeapUsage, cdp.Empty{})
		return u.UsedSize, err
	})
	if err != nil {
		t.Fatalf("heap usage: %v", err)
	}
	return used
}
