package demo

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

func TestEval(t *testing.T) {
	tests := []struct {
		expr string
		want float64
		err  string
	}{
		{"1 + 2 * 3", 7, ""},
		{"(1 + 2) * 3", 9, ""},
		{"2340 * 0.17 + sqrt(144)", 409.8, ""},
		{"-2 ^ 2", -4, ""},
		{"2 ^ 3 ^ 2", 512, ""},
		{"10 % 4", 2, ""},
		{"1_000 / 8", 125, ""},
		{"1.5e3 - 500", 1000, ""},
		{"max(3, min(10, 7)) + abs(-1)", 8, ""},
		{"round(2.5) + floor(1.9) + ceil(1.1)", 6, ""},
		{"2 * pi", 6.283185307179586, ""},
		{"--3", 3, ""},
		{"1 / 0", 0, "division by zero"},
		{"1 +", 0, "ends too early"},
		{"(1 + 2", 0, "missing )"},
		{"1 2", 0, `unexpected '2'`},
		{"foo(1)", 0, `unknown name "foo"`},
		{"min(1)", 0, "min takes 2 argument(s), got 1"},
		{"sqrt 4", 0, "sqrt needs ( after it"},
		{"sqrt(-1)", 0, "not a finite number"},
		{"", 0, "ends too early"},
		{strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500), 0, "nests more than"},
		{strings.Repeat("-", 500) + "1", 0, "nests more than"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			got, err := Eval(tt.expr)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Eval = %v, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || abs(got-tt.want) > 1e-9 {
				t.Fatalf("Eval = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "max(1,2)^2", "((1))", "-1e3%7", "sqrt(2)/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Eval(s) // must not panic or hang
	})
}

func writeFiles(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFileSearch(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.go":          "package a\n// TODO: one\nfunc f() {}\n",
		"sub/b.txt":     "nothing\nmore\n  FIXME two  \n",
		".git/c.go":     "// TODO hidden\n",
		"bin.dat":       "TODO\x00binary\n",
		"sub/deep/d.go": "// TODO three\n// TODO four\n",
	})
	search := FileSearch(dir)
	call := func(in string) (SearchOutput, error) {
		out, err := search.Call(context.Background(), json.RawMessage(in))
		var so SearchOutput
		if err == nil {
			err = json.Unmarshal(out, &so)
		}
		return so, err
	}
	out, err := call(`{"pattern":"TODO|FIXME"}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range out.Matches {
		got = append(got, m.File+":"+string(rune('0'+m.Line))+":"+m.Text)
	}
	want := "a.go:2:// TODO: one|sub/b.txt:3:FIXME two|sub/deep/d.go:1:// TODO three|sub/deep/d.go:2:// TODO four"
	if strings.Join(got, "|") != want || out.Truncated || out.Files != 4 {
		t.Errorf("matches = %v (files %d, truncated %v)\nwant %s", got, out.Files, out.Truncated, want)
	}
	out, err = call(`{"pattern":"TODO","glob":"*.go","max":2}`)
	if err != nil || len(out.Matches) != 2 || !out.Truncated {
		t.Errorf("limited search = %+v, %v", out, err)
	}
	if _, err := call(`{"pattern":"("}`); err == nil || !strings.Contains(err.Error(), "not a valid regular expression") {
		t.Errorf("bad pattern: %v", err)
	}
	if _, err := FileSearch(filepath.Join(dir, "missing")).Call(context.Background(), json.RawMessage(`{"pattern":"x"}`)); err == nil {
		t.Error("searching a missing folder succeeded")
	}
}

func TestClock(t *testing.T) {
	fixed := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	c := Clock(func() time.Time { return fixed })
	out, err := c.Call(context.Background(), json.RawMessage(`{"zone":"Asia/Tokyo"}`))
	if err != nil || string(out) != `{"zone":"Asia/Tokyo","time":"2025-03-01T21:00:00+09:00"}` {
		t.Errorf("Tokyo = %s, %v", out, err)
	}
	for _, zone := range []string{"Mars/Olympus", "", "Local"} {
		if _, err := c.Call(context.Background(), json.RawMessage(`{"zone":"`+zone+`"}`)); err == nil {
			t.Errorf("zone %q accepted", zone)
		}
	}
}

func TestRun(t *testing.T) {
	dir := writeFiles(t, map[string]string{"main.go": "// TODO: demo\n"})
	res, err := Run(context.Background(), trace.New(trace.Options{}), dir)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	if res.Termination != trace.TerminationSuccess || !strings.Contains(res.Answer, "409.8") {
		t.Fatalf("answer %q, %s", res.Answer, res.Termination)
	}
	if st.ToolCalls != 5 || st.Errors != 1 || st.Children != 1 || st.Iterations != 6 || len(st.ByModel) != 2 {
		t.Errorf("stats = %+v", st)
	}
	var toolEnds, toolStarts, ends []string
	for _, r := range res.Records {
		switch r.Type {
		case trace.TypeToolStart:
			toolStarts = append(toolStarts, r.Name)
		case trace.TypeToolEnd, trace.TypeToolError:
			ends = append(ends, r.Name)
		}
		switch r.Type {
		case trace.TypeToolEnd:
			toolEnds = append(toolEnds, r.Name+" "+r.Output.String())
		case trace.TypeToolError:
			if r.Name != "clock" || !strings.Contains(r.Error, `unknown time zone "Mars/Olympus"`) {
				t.Errorf("tool.error = %s %s", r.Name, r.Error)
			}
		}
	}
	// The first turn runs calculator and search_files in parallel: the
	// trace has them in the order the model asked, whichever finished first.
	calls := "calculator search_files clock clock summarize"
	if strings.Join(toolStarts, " ") != calls || strings.Join(ends, " ") != calls {
		t.Errorf("tool.start order %v, end order %v; want %s", toolStarts, ends, calls)
	}
	joined := strings.Join(toolEnds, "\n")
	for _, want := range []string{`"value":409.8`, `"file":"main.go","line":1`, `"zone":"UTC"`, "summarize "} {
		if !strings.Contains(joined, want) {
			t.Errorf("tool results lack %s:\n%s", want, joined)
		}
	}
	// Untraced, it runs the same way.
	res2, err := Run(context.Background(), nil, dir)
	if err != nil || res2.Answer != res.Answer {
		t.Errorf("untraced = %q, %v", res2.Answer, err)
	}
}
