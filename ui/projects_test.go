package ui_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/sqlite"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/ui"
)

// publicAddr returns a non-loopback IPv4 address of this machine, as a
// team's collector listens on; on a machine with none, 0.0.0.0 (every
// interface, which the browser reaches through loopback).
func publicAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return "0.0.0.0"
}

// TestProjectsOffLoopback drives the UI against a collector listening on
// a non-loopback address with keys required and two projects: a key for
// both signs in, sees the first project's runs only, switches to the
// other with the header's picker (live updates included), and a link with
// ?project= opens that project.
func TestProjectsOffLoopback(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "loupe.db")
	st, err := sqlite.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alpha", "bravo"} {
		if _, err := server.CreateProject(ctx, st, p, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	reader, _, err := server.CreateKey(ctx, st, server.ScopeRead, "reviewer", time.Now(), "alpha", "bravo")
	if err != nil {
		t.Fatal(err)
	}
	ingest, _, err := server.CreateKey(ctx, st, server.ScopeIngest, "agents", time.Now(), "alpha", "bravo")
	if err != nil {
		t.Fatal(err)
	}
	var opened []store.Store
	srv, err := server.New(server.Options{Store: st, UI: ui.Handler(), RequireKeys: true, Projects: func(ctx context.Context, name string) (*server.Project, error) {
		pdsn, err := store.ProjectDSN(dsn, name)
		if err != nil {
			return nil, err
		}
		pst, err := sqlite.Open(ctx, pdsn)
		if err != nil {
			return nil, err
		}
		opened = append(opened, pst)
		return &server.Project{Store: pst, Close: pst.Close}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(publicAddr(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := server.NewHTTPServer(ln.Addr().String(), srv)
	go hs.Serve(ln)
	t.Cleanup(func() { srv.Close(); hs.Close(); st.Close() })
	base := "http://" + ln.Addr().String()
	if a := ln.Addr().(*net.TCPAddr); a.IP.IsUnspecified() {
		base = "http://127.0.0.1:" + strconv.Itoa(a.Port)
	}

	post := func(project string, recs ...trace.Record) {
		t.Helper()
		var b bytes.Buffer
		for i := range recs {
			b.Write(recs[i].AppendJSON(nil))
			b.WriteByte('\n')
		}
		req, _ := http.NewRequest("POST", base+"/v1/records", &b)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+ingest)
		req.Header.Set(server.ProjectHeader, project)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST /v1/records into %s: %s", project, resp.Status)
		}
	}
	runIn := func(project, name string) trace.TraceID {
		b := newBuilder()
		b.t = time.Now()
		root := trace.NewSpanID()
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunStart, Name: name})
		b.rec(trace.Record{SpanID: root, Type: trace.TypeRunEnd, Name: name, Status: "success", Duration: time.Millisecond})
		post(project, b.recs...)
		return b.id
	}
	alpha, bravo := runIn("alpha", "alpha-run"), runIn("bravo", "bravo-run")
	row := func(id trace.TraceID) string { return `#runs tr[data-trace="` + id.String() + `"]` }

	tb := newTab(t, 90*time.Second)
	tb.do(t, "sign in off loopback", chromedp.Navigate(base+"/"), signIn(reader), waitLoaded(row(alpha)), waitLoaded(`#project`))
	if n := eval[int](t, tb, `document.querySelectorAll('`+row(bravo)+`').length`); n != 0 {
		t.Error("alpha's runs list shows bravo's run")
	}
	if got := eval[string](t, tb, `[...document.querySelectorAll('#project option')].map(o => o.value).join(',') + '/' + document.querySelector('#project').value`); got != "alpha,bravo/alpha" {
		t.Errorf("project picker: %q, want alpha,bravo with alpha chosen", got)
	}
	tb.screenshot(t, "projects-alpha")

	tb.do(t, "switch to bravo",
		chromedp.SetValue(chromedp.CSS(`#project`), "bravo"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#project').dispatchEvent(new Event('change'))`),
		waitLoaded(row(bravo)))
	if n := eval[int](t, tb, `document.querySelectorAll('`+row(alpha)+`').length`); n != 0 {
		t.Error("bravo's runs list shows alpha's run")
	}
	// Live, over the stream of the chosen project.
	live := runIn("bravo", "bravo-live")
	tb.do(t, "bravo's new run appears live", waitLoaded(row(live)))
	runIn("alpha", "alpha-live")
	tb.do(t, "open bravo's run", chromedp.Navigate(base+"/#/run/"+bravo.String()), waitLoaded(`#tree .row`))
	tb.screenshot(t, "projects-bravo")

	// A link into alpha (an alert's) opens alpha.
	tb.do(t, "a link with ?project=alpha", chromedp.Navigate(base+"/?project=alpha#/"), waitLoaded(row(alpha)))
	if got := eval[string](t, tb, `location.search + '|' + document.querySelector('#project').value`); got != "|alpha" {
		t.Errorf("after the link: %q, want the query dropped and alpha chosen", got)
	}
	onlyRefusals(t, tb)
}
