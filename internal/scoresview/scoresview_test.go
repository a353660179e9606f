package scoresview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

func TestTable(t *testing.T) {
	id := trace.TraceID{0xab, 0xcd}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b bytes.Buffer
	err := Table(&b, []store.Score{
		{ID: "1", TraceID: id, SpanID: trace.SpanID{1}, Name: "thumbs", Kind: store.ScoreBoolean, Value: 1, Source: store.SourceHuman, Author: "ann", Comment: "line one\nline two\twith a tab", Time: at},
		{ID: "2", Session: "chat-1", Name: "label", Kind: store.ScoreCategorical, Category: "good", Source: store.SourceAPI, Time: at},
		{ID: "3", TraceID: id, Name: "q", Kind: store.ScoreNumeric, Value: 0.25, Source: store.SourceEval, Comment: strings.Repeat("x", 100), Time: at},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, want := range [][]string{
		{"ID", "TIME", "TARGET", "NAME", "VALUE", "SOURCE", "AUTHOR", "COMMENT"},
		{"abcd00000000/0100000000000000", "2026-01-02 03:04:05", "thumbs", "true", "human", "ann", "line one…"},
		{"session:chat-1", "label", "good", "api", "-"},
		{"0.25", "eval", strings.Repeat("x", 60) + "…"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(b.String(), "line two") || strings.Contains(b.String(), "\twith") {
		t.Errorf("a comment broke the table:\n%s", b.String())
	}
}
