package console_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/internal/tracefix"
	"github.com/loupe-dev/loupe/trace"
)

// fixedIDs replaces random ids with ones numbered in order of appearance,
// so that golden files are stable.
func fixedIDs(recs []trace.Record) []trace.Record {
	spans := map[trace.SpanID]trace.SpanID{}
	id := func(s trace.SpanID) trace.SpanID {
		if s.IsZero() {
			return s
		}
		if n, ok := spans[s]; ok {
			return n
		}
		n := trace.SpanID{7: byte(len(spans) + 1)}
		spans[s] = n
		return n
	}
	for i := range recs {
		recs[i].TraceID = trace.TraceID{15: 1}
		recs[i].SpanID, recs[i].ParentID = id(recs[i].SpanID), id(recs[i].ParentID)
	}
	return recs
}

func TestTreeGolden(t *testing.T) {
	tr := trace.New(trace.Options{Now: tracefix.Clock(time.Millisecond)})
	recs := fixedIDs(tracefix.Record(tr).Records())
	for _, tt := range []struct {
		name string
		o    console.Options
	}{
		{"tree.txt", console.Options{}},
		{"tree-io.txt", console.Options{IO: true, MaxIO: 40}},
	} {
		var b bytes.Buffer
		if err := console.Tree(&b, recs, tt.o); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, tt.name, b.Bytes())
	}
}

func TestSinkPrintsTreeWhenRunEnds(t *testing.T) {
	var b bytes.Buffer
	sink := console.NewSink(&b, console.FormatTree, console.Options{})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Dispatch: trace.DispatchOptions{Inline: true}})
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	ec.ToolCall("search", nil, nil, time.Millisecond, nil)
	if b.Len() != 0 {
		t.Fatal("tree printed before the run ended")
	}
	ec.End(nil, nil)
	if !strings.Contains(b.String(), "└─ run r  success") || !strings.Contains(b.String(), "tool search  1.0ms") {
		t.Errorf("tree:\n%s", b.String())
	}
	// An unfinished run is printed, marked, on Close.
	b.Reset()
	_, ec2 := tr.Start(context.Background(), "stuck", trace.RunOptions{})
	ec2.StartIteration()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "run stuck  (unfinished)") {
		t.Errorf("unfinished run not shown on Close:\n%s", b.String())
	}
}

func TestSinkJSONLines(t *testing.T) {
	var b bytes.Buffer
	sink := console.NewSink(&b, console.FormatJSON, console.Options{})
	tr := trace.New(trace.Options{Sinks: []trace.Sink{sink}, Dispatch: trace.DispatchOptions{Inline: true}})
	_, ec := tr.Start(context.Background(), "r", trace.RunOptions{})
	ec.End(nil, nil)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", b.String())
	}
	for _, l := range lines {
		if _, err := trace.DecodeRecord([]byte(l)); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "1.50s", 35 * time.Millisecond: "35.0ms", 812 * time.Microsecond: "812µs", 0: "0µs",
	} {
		if got := console.Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
