package ui_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/trace"
)

// bigTrace stores a trace of about n spans: a root run and iterations of
// an iteration span, a model call and a tool call (every 50th failing).
func bigTrace(b *testing.B, e *env, n int) trace.TraceID {
	bl := newBuilder()
	root := trace.NewSpanID()
	bl.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: "big"})
	for i := 1; 1+3*i <= n; i++ {
		it, tool, model := trace.NewSpanID(), trace.NewSpanID(), trace.NewSpanID()
		bl.rec(trace.Record{SpanID: it, ParentID: root, Type: trace.TypeIterationStart, Iteration: i})
		bl.rec(trace.Record{SpanID: model, ParentID: it, Type: trace.TypeModelCall, Name: "m", Iteration: i, Duration: time.Millisecond,
			Usage: trace.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.001}, Output: trace.Value(`"call tool"`)})
		bl.rec(trace.Record{SpanID: tool, ParentID: it, Type: trace.TypeToolStart, Name: "tool" + strconv.Itoa(i%7), Iteration: i, Input: trace.Value(`{"x":1}`)})
		end := trace.Record{SpanID: tool, ParentID: it, Type: trace.TypeToolEnd, Name: "tool" + strconv.Itoa(i%7), Iteration: i, Duration: time.Millisecond, Output: trace.Value(`{"ok":true}`)}
		if i%50 == 0 {
			end.Type, end.Output, end.Error = trace.TypeToolError, nil, "failed"
		}
		bl.rec(end)
		bl.rec(trace.Record{SpanID: it, ParentID: root, Type: trace.TypeIterationEnd, Iteration: i, Status: "continue", Duration: 3 * time.Millisecond})
	}
	bl.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: "big", Status: "success", Duration: time.Duration(n) * time.Millisecond})
	e.append(b, bl.recs)
	return bl.id
}

// BenchmarkTreeDraw is the time from navigation to a drawn tree (the
// root row selected and its details shown, from the first page of
// records) for traces of 1k, 10k and 100k spans, in headless Chromium,
// server and store included; ms-whole-tree is the time until every page
// is in the tree. Run it
// with: go test -run x -bench TreeDraw -benchtime 3x ./ui
func BenchmarkTreeDraw(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(strconv.Itoa(n/1000)+"k", func(b *testing.B) {
			e := newEnv(b)
			id := bigTrace(b, e, n)
			tb := newTab(b, 10*time.Minute)
			url := e.ts.URL + "/#/run/" + id.String()
			var apiMS, apiMB float64
			var parts [4]float64 // in the page: load to drawn, the first page's fetch, building the tree from it, load to the whole tree
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				t0 := time.Now()
				resp, err := http.Get(e.ts.URL + "/api/v1/traces/" + id.String())
				if err != nil {
					b.Fatal(err)
				}
				nbytes, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				apiMS += float64(time.Since(t0).Microseconds()) / 1000
				apiMB = float64(nbytes) / 1e6
				if err := chromedp.Do(tb.ctx, chromedp.Navigate("about:blank")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := chromedp.Do(tb.ctx, chromedp.Navigate(url), waitLoaded(`#tree .row.sel`)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				// Then the rest of the trace, page by page, until the
				// whole tree is there.
				if err := chromedp.Do(tb.ctx, waitLoaded(`#app[data-complete="true"]`)); err != nil {
					b.Fatal(err)
				}
				ms, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]string](`(d => [d.drawMs, d.fetchMs, d.buildMs, d.fullMs])(document.getElementById('app').dataset)`))
				if err != nil || len(ms) != 4 {
					b.Fatal(err)
				}
				for i, m := range ms {
					v, _ := strconv.ParseFloat(m, 64)
					parts[i] += v
				}
				rows, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](`document.querySelectorAll('#tree .row').length`))
				if err != nil || rows > 200 {
					b.Fatalf("%d row elements in the DOM for %d spans (%v): not virtualised", rows, n, err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/draw")
			b.ReportMetric(parts[0]/float64(b.N), "ms-in-page")
			b.ReportMetric(parts[1]/float64(b.N), "ms-fetch")
			b.ReportMetric(parts[2]/float64(b.N), "ms-build")
			b.ReportMetric(parts[3]/float64(b.N), "ms-whole-tree")
			b.ReportMetric(apiMS/float64(b.N), "ms-api-alone")
			b.ReportMetric(apiMB, "MB-api")
		})
	}
}
