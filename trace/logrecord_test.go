package trace_test

import (
	"context"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

func TestSeverityText(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, ""}, {1, "TRACE"}, {4, "TRACE4"}, {5, "DEBUG"}, {9, "INFO"}, {10, "INFO2"}, {13, "WARN"}, {17, "ERROR"}, {20, "ERROR4"}, {21, "FATAL"}, {24, "FATAL4"}, {25, ""}, {-3, ""}} {
		if got := trace.SeverityText(c.n); got != c.want {
			t.Errorf("SeverityText(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestLogEntryRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name string
		e    trace.LogEntry
		want trace.Record
	}{
		{"info", trace.LogEntry{Name: "app", SeverityNumber: trace.SeverityInfo, Body: trace.Text("hello"), Attributes: trace.Value(`{"k":1}`), Time: at},
			trace.Record{Type: trace.TypeLog, Name: "app", Status: "INFO", Time: at, Output: trace.Value(`{"body":"hello","attributes":{"k":1},"severity_number":9}`)}},
		{"own severity text", trace.LogEntry{Severity: "notice", SeverityNumber: 10, Body: trace.Text("n")},
			trace.Record{Type: trace.TypeLog, Status: "notice", Output: trace.Value(`{"body":"n","severity_number":10}`)}},
		{"error", trace.LogEntry{SeverityNumber: trace.SeverityError + 1, Body: trace.Text("boom")},
			trace.Record{Type: trace.TypeLog, Status: "ERROR2", Error: "boom", Output: trace.Value(`{"body":"boom","severity_number":18}`)}},
		{"error without body", trace.LogEntry{SeverityNumber: trace.SeverityFatal},
			trace.Record{Type: trace.TypeLog, Status: "FATAL", Error: "FATAL", Output: trace.Value(`{"severity_number":21}`)}},
		{"severity out of range", trace.LogEntry{SeverityNumber: 99, Body: trace.Value(`not json`)},
			trace.Record{Type: trace.TypeLog, Output: trace.Value(`{"body":"not json"}`)}},
		{"empty", trace.LogEntry{}, trace.Record{Type: trace.TypeLog}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.e.Record()
			if string(got.Output) != string(c.want.Output) || got.Type != c.want.Type || got.Name != c.want.Name ||
				got.Status != c.want.Status || got.Error != c.want.Error || !got.Time.Equal(c.want.Time) {
				t.Errorf("got  %s\nwant %s", got.AppendJSON(nil), c.want.AppendJSON(nil))
			}
			back, ok := got.Entry()
			if !ok {
				t.Fatal("Entry of a log record reports false")
			}
			if again := back.Record(); string(again.Output) != string(got.Output) || again.Status != got.Status || again.Error != got.Error {
				t.Errorf("Entry then Record = %s, want %s", again.AppendJSON(nil), got.AppendJSON(nil))
			}
		})
	}
	if _, ok := (&trace.Record{Type: trace.TypeMessage}).Entry(); ok {
		t.Error("Entry of a message reports true")
	}
	r := trace.Record{Type: trace.TypeLog, Output: trace.Value(`{"$loupe":"truncated","bytes":9,"head":"x"}`)}
	if e, _ := r.Entry(); string(e.Body) != string(r.Output) {
		t.Errorf("a truncated Output's Body = %s, want the marker", e.Body)
	}
}

// TestLogUnderSpan: Log records under the span in progress in ctx when it
// is the run's, else under the iteration; a nested run's logs stay its own.
func TestLogUnderSpan(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "main", trace.RunOptions{})
	it := ec.StartIteration()
	_ = it
	trace.Log(ctx, trace.LogEntry{Body: trace.Text("in the iteration")})
	s := ec.StartSpan(trace.SpanTool, "search", nil)
	sctx := s.Context(ctx)
	trace.Log(sctx, trace.LogEntry{Body: trace.Text("in the tool")})
	cctx, child := trace.SpawnChild(sctx, "sub", nil)
	trace.Log(cctx, trace.LogEntry{Body: trace.Text("in the child")})
	child.End(nil, nil)
	s.End(nil, nil)
	var toolSpan trace.SpanID
	trace.Tool(ctx, "lookup", nil, func(ctx context.Context) (int, error) {
		trace.Log(ctx, trace.LogEntry{Body: trace.Text("in trace.Tool")})
		return 1, nil
	})
	trace.Log(context.Background(), trace.LogEntry{Body: trace.Text("nowhere")})
	ec.EndIteration("terminate")
	ec.End(nil, nil)

	parents := map[string]trace.SpanID{}
	var iter trace.SpanID
	for _, r := range ec.Records() {
		if r.Type == trace.TypeIterationStart && r.Depth == 0 {
			iter = r.SpanID
		}
		if r.Type == trace.TypeToolStart && r.Name == "lookup" {
			toolSpan = r.SpanID
		}
		if e, ok := r.Entry(); ok {
			parents[e.Body.Text()] = r.ParentID
		}
	}
	if len(parents) != 4 {
		t.Fatalf("log records %v, want 4", parents)
	}
	if parents["in trace.Tool"] != toolSpan {
		t.Errorf("a log in trace.Tool's function hangs under %s, want its call %s", parents["in trace.Tool"], toolSpan)
	}
	if parents["in the iteration"] != iter {
		t.Errorf("a log outside a span hangs under %s, want the iteration %s", parents["in the iteration"], iter)
	}
	if parents["in the tool"] != s.ID() {
		t.Errorf("a log in a tool call hangs under %s, want the tool span %s", parents["in the tool"], s.ID())
	}
	if parents["in the child"] != child.SpanID() {
		t.Errorf("a log in a child run hangs under %s, want the child's span %s", parents["in the child"], child.SpanID())
	}
	if st := ec.Stats(); st.Errors != 0 || st.Records != len(ec.Records()) {
		t.Errorf("stats %+v: logs are records, not errors", st)
	}
}
