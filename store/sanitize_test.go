package store

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loupe-dev/loupe/trace"
)

func TestSanitize(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	tags := make([]string, 70)
	for i := range tags {
		tags[i] = "t"
	}
	for _, tt := range []struct {
		name string
		in   trace.Record
		want trace.Record
	}{
		{"clean record unchanged",
			trace.Record{Name: "search", Status: "ok", Error: "boom", Run: &trace.RunInfo{Tags: []string{"env:ci"}}, Input: trace.Value(`{"q":"x"}`), Usage: trace.Usage{Provider: "openai"}},
			trace.Record{Name: "search", Status: "ok", Error: "boom", Run: &trace.RunInfo{Tags: []string{"env:ci"}}, Input: trace.Value(`{"q":"x"}`), Usage: trace.Usage{Provider: "openai"}}},
		{"invalid UTF-8 and NUL in strings",
			trace.Record{Name: "a\xffb", Status: "\xc3", Error: "x\x00y", Run: &trace.RunInfo{Tags: []string{"ok", "k:\xe2\x82"}}, Usage: trace.Usage{Provider: "p\xff"}},
			trace.Record{Name: "a\uFFFDb", Status: "\uFFFD", Error: "x\uFFFDy", Run: &trace.RunInfo{Tags: []string{"ok", "k:\uFFFD"}}, Usage: trace.Usage{Provider: "p\uFFFD"}}},
		{"long name cut at a character with a marker",
			trace.Record{Name: long},
			trace.Record{Name: strings.Repeat("é", (MaxNameBytes-len("…[truncated by loupe: 1200 bytes]"))/2) + "…[truncated by loupe: 1200 bytes]"}},
		{"long error",
			trace.Record{Error: strings.Repeat("x", MaxErrorBytes+1)},
			trace.Record{Error: strings.Repeat("x", MaxErrorBytes-len("…[truncated by loupe: 65537 bytes]")) + "…[truncated by loupe: 65537 bytes]"}},
		{"error at its bound kept",
			trace.Record{Error: strings.Repeat("x", MaxErrorBytes)},
			trace.Record{Error: strings.Repeat("x", MaxErrorBytes)}},
		{"too many tags",
			trace.Record{Run: &trace.RunInfo{Tags: tags}},
			trace.Record{Run: &trace.RunInfo{Tags: append(tags[:MaxTags-1:MaxTags-1], "…[truncated by loupe: 70 tags]")}}},
		{"invalid UTF-8 inside a JSON string",
			trace.Record{Input: trace.Value("{\"q\":\"a\xffb\"}"), Output: trace.Value("\"\xc3\"")},
			trace.Record{Input: trace.Value("{\"q\":\"a\uFFFDb\"}"), Output: trace.Value("\"\uFFFD\"")}},
		{"not JSON becomes a JSON string",
			trace.Record{Input: trace.Value(`{"q":`), Output: trace.Value("plain \xff text"), Thinking: trace.Value(`"bad \x escape"`)},
			trace.Record{Input: trace.Text(`{"q":`), Output: trace.Text("plain \uFFFD text"), Thinking: trace.Text(`"bad \x escape"`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			Sanitize(&r)
			got, want := r.AppendJSON(nil), tt.want.AppendJSON(nil)
			if string(got) != string(want) {
				t.Errorf("Sanitize:\n got %s\nwant %s", got, want)
			}
			checkSanitized(t, &r)
		})
	}
}

// TestSanitizeShares checks that Sanitize replaces the Tags and Values it
// changes instead of writing into them, and keeps those it need not change.
func TestSanitizeShares(t *testing.T) {
	tags := []string{"ok", "bad\xff"}
	in := trace.Value("\"\xff\"")
	out := trace.Value(`"fine"`)
	r := trace.Record{Run: &trace.RunInfo{Tags: tags}, Input: in, Output: out}
	Sanitize(&r)
	if tags[1] != "bad\xff" || string(in) != "\"\xff\"" {
		t.Errorf("Sanitize wrote into the record's slices: tags %q input %q", tags, in)
	}
	if &r.Output[0] != &out[0] {
		t.Error("Sanitize copied a value that needed nothing")
	}
	clean := []string{"a", "b"}
	run := &trace.RunInfo{Tags: clean, Session: "conv-1", User: "ada"}
	r = trace.Record{Run: run}
	Sanitize(&r)
	if r.Run != run || &r.Tags()[0] != &clean[0] {
		t.Error("Sanitize copied a Run or tags that needed nothing")
	}
	shared := &trace.RunInfo{Tags: clean, Session: "conv\x00"}
	r = trace.Record{Run: shared}
	Sanitize(&r)
	if shared.Session != "conv\x00" || r.Session() != "conv\uFFFD" || &r.Tags()[0] != &clean[0] {
		t.Errorf("Sanitize of a session: the record's Run session %q, the shared one %q", r.Session(), shared.Session)
	}
	run = &trace.RunInfo{Tags: clean, Session: "conv-1"}
	if n := testing.AllocsPerRun(100, func() {
		r := trace.Record{Name: "n", Error: "e", Run: run, Input: out}
		Sanitize(&r)
	}); n != 0 {
		t.Errorf("Sanitize of a clean record allocates %v times", n)
	}
}

// checkSanitized fails t unless r holds what Sanitize promises.
func checkSanitized(t *testing.T, r *trace.Record) {
	t.Helper()
	for _, f := range []struct {
		name string
		s    string
		max  int
	}{{"name", r.Name, MaxNameBytes}, {"status", r.Status, MaxNameBytes}, {"error", r.Error, MaxErrorBytes}, {"provider", r.Usage.Provider, MaxNameBytes}} {
		if !utf8.ValidString(f.s) || len(f.s) > f.max || strings.IndexByte(f.s, 0) >= 0 {
			t.Errorf("%s %q: invalid UTF-8, NUL, or longer than %d", f.name, f.s, f.max)
		}
	}
	if len(r.Tags()) > MaxTags {
		t.Errorf("%d tags, more than %d", len(r.Tags()), MaxTags)
	}
	for _, tag := range r.Tags() {
		if !utf8.ValidString(tag) || len(tag) > MaxNameBytes || strings.IndexByte(tag, 0) >= 0 {
			t.Errorf("tag %q: invalid UTF-8, NUL, or too long", tag)
		}
	}
	for _, v := range []trace.Value{r.Input, r.Output, r.Thinking} {
		if len(v) > 0 && (!json.Valid(v) || !utf8.Valid(v)) {
			t.Errorf("value %q is not valid JSON in valid UTF-8", v)
		}
	}
	b, err := json.Marshal(r)
	if err != nil || !utf8.Valid(b) {
		t.Errorf("json.Marshal = %q, %v; want valid UTF-8", b, err)
	}
}

func FuzzSanitize(f *testing.F) {
	f.Add("search", "ok", "boom", "env:ci", "openai", []byte(`{"q":"x"}`), []byte(`"out"`), uint8(1), 0)
	f.Add("a\xffb", "\xc3", "x\x00y", "k:\xe2\x82", "p\xff", []byte("{\"q\":\"a\xffb\"}"), []byte("not json"), uint8(70), 1100)
	f.Add("", "", "", "", "", []byte(`"\x"`), []byte("[1,"), uint8(0), 70000)
	f.Fuzz(func(t *testing.T, name, status, errText, tag, provider string, input, output []byte, ntags uint8, pad int) {
		if pad < 0 || pad > 1<<17 {
			pad = 0
		}
		// Pad the strings past their bounds, cut in the middle of a
		// multi-byte character where pad is odd.
		name += strings.Repeat("é", pad/2)
		errText += strings.Repeat("€", pad/3)
		tags := make([]string, ntags)
		for i := range tags {
			tags[i] = tag + strings.Repeat("\xe2\x82", i%3)
		}
		r := trace.Record{Name: name, Status: status, Error: errText, Run: &trace.RunInfo{Tags: tags}, Usage: trace.Usage{Provider: provider},
			Input: input, Output: output, Thinking: append(trace.Value(nil), output...)}
		Sanitize(&r)
		checkSanitized(t, &r)
		// Sanitizing again changes nothing.
		again := r
		Sanitize(&again)
		if string(again.AppendJSON(nil)) != string(r.AppendJSON(nil)) {
			t.Errorf("Sanitize is not idempotent:\n%s\n%s", r.AppendJSON(nil), again.AppendJSON(nil))
		}
	})
}
