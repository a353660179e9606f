package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loupe-dev/loupe/schema"
	"github.com/loupe-dev/loupe/trace"
)

func TestSessionAndUserOnRunStart(t *testing.T) {
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "chat", trace.RunOptions{Session: "conv-1", User: "ada"})
	ec.End(nil, nil)
	recs := ec.Records()
	if recs[0].Type != trace.TypeRunStart || recs[0].Session() != "conv-1" || recs[0].User() != "ada" {
		t.Fatalf("run.start = %+v, want session conv-1 and user ada", recs[0])
	}
	for _, r := range recs[1:] {
		if r.Run != nil {
			t.Errorf("%s carries session %q user %q; only run.start does", r.Type, r.Session(), r.User())
		}
	}
}

func TestSessionEncoding(t *testing.T) {
	var doc jsonschema.Schema
	if err := json.Unmarshal(schema.RecordV1, &doc); err != nil {
		t.Fatal(err)
	}
	sch, err := doc.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	id := trace.TraceID{1, 2, 3}
	for _, tt := range []struct {
		name          string
		session, user string
		want          string // the tail of the line
	}{
		{"both", "conv-1", "ada", `"tags":["a"],"session":"conv-1","user":"ada"}`},
		{"session only", "conv-<2>", "", `"tags":["a"],"session":"conv-\u003c2\u003e"}`},
		{"user only", "", "ümlaut", `"tags":["a"],"user":"ümlaut"}`},
		{"neither", "", "", `"tags":["a"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := trace.Record{V: 1, TraceID: id, SpanID: trace.SpanID{1}, Seq: 1, Type: trace.TypeRunStart, Name: "run",
				Run: &trace.RunInfo{Tags: []string{"a"}, Session: tt.session, User: tt.user}}
			r.Time = r.Time.AddDate(2025, 0, 0)
			line := r.AppendJSON(nil)
			if !bytes.HasSuffix(line, []byte(tt.want)) {
				t.Errorf("line %s does not end with %s", line, tt.want)
			}
			std, err := json.Marshal(r)
			if err != nil || !bytes.Equal(std, line) {
				t.Errorf("json.Marshal differs from AppendJSON:\n%s\n%s", std, line)
			}
			got, err := trace.DecodeRecord(line)
			if err != nil {
				t.Fatal(err)
			}
			if got.Session() != tt.session || got.User() != tt.user {
				t.Errorf("decoded session %q user %q, want %q %q", got.Session(), got.User(), tt.session, tt.user)
			}
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("schema refuses %s: %v", line, err)
			}
		})
	}
}

func TestBoundID(t *testing.T) {
	long := strings.Repeat("é", trace.MaxSessionBytes) // 2 bytes each
	for _, tt := range []struct{ in, want string }{
		{"conv-1", "conv-1"},
		{"a\xffb", "a\uFFFDb"},
		{"a\x00b", "a\uFFFDb"},
		{long, long[:trace.MaxSessionBytes]},
		{strings.Repeat("x", 255) + "é", strings.Repeat("x", 255)},
	} {
		got := trace.BoundID(tt.in)
		if got != tt.want || len(got) > trace.MaxSessionBytes || !utf8.ValidString(got) {
			t.Errorf("BoundID(%.20q…) = %.20q… (%d bytes), want %.20q…", tt.in, got, len(got), tt.want)
		}
	}
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(context.Background(), "chat", trace.RunOptions{Session: long + "tail", User: "u\x00"})
	ec.End(nil, nil)
	if r := ec.Records()[0]; len(r.Session()) > trace.MaxSessionBytes || r.User() != "u\uFFFD" {
		t.Errorf("Start kept session of %d bytes and user %q", len(r.Session()), r.User())
	}
}
