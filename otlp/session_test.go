package otlp

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// TestSessionAttributes: a span's session and user attributes, in any
// of the dialects, reach its first record, whichever span of the trace
// carries them (or its resource), and go back out as session.id and
// user.id.
func TestSessionAttributes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name                string
		res, root, child    map[string]string
		wantRoot, wantChild [2]string // session, user
	}{
		{name: "OpenTelemetry on the root", root: map[string]string{"session.id": "s-1", "user.id": "u-1"}, wantRoot: [2]string{"s-1", "u-1"}},
		{name: "GenAI conversation on a child", child: map[string]string{"gen_ai.conversation.id": "conv-9"}, wantChild: [2]string{"conv-9", ""}},
		{name: "Langfuse", root: map[string]string{"langfuse.session.id": "lf-s", "langfuse.user.id": "lf-u"}, wantRoot: [2]string{"lf-s", "lf-u"}},
		{name: "resource", res: map[string]string{"session.id": "r-s", "user.id": "r-u"},
			wantRoot: [2]string{"r-s", "r-u"}, wantChild: [2]string{"r-s", "r-u"}},
		{name: "span before resource, session.id first", res: map[string]string{"session.id": "r-s"},
			root:     map[string]string{"gen_ai.conversation.id": "c", "session.id": "s", "user.id": ""},
			wantRoot: [2]string{"s", ""}, wantChild: [2]string{"r-s", ""}},
		{name: "long and invalid ids are bounded", root: map[string]string{"session.id": strings.Repeat("x", 300), "user.id": "a\xffb"},
			wantRoot: [2]string{strings.Repeat("x", trace.MaxSessionBytes), "a\uFFFDb"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			for k, v := range tt.res {
				rs.Resource().Attributes().PutStr(k, v)
			}
			spans := rs.ScopeSpans().AppendEmpty().Spans()
			for i, attrs := range []map[string]string{tt.root, tt.child} {
				sp := spans.AppendEmpty()
				sp.SetTraceID(pcommon.TraceID{1})
				sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
				if i == 1 {
					sp.SetParentSpanID(pcommon.SpanID{1})
					sp.Attributes().PutStr("gen_ai.operation.name", "chat")
					sp.Attributes().PutStr("gen_ai.request.model", "m")
				}
				sp.SetName("span")
				sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
				sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
				for k, v := range attrs {
					sp.Attributes().PutStr(k, v)
				}
			}
			res := Map(td, &Options{})
			checkWellFormed(t, res.Records)
			got := map[trace.SpanID][2]string{}
			for _, r := range res.Records {
				if r.Session() != "" || r.User() != "" {
					if _, dup := got[r.SpanID]; dup {
						t.Errorf("span %s: more than one record carries the session", r.SpanID)
					}
					got[r.SpanID] = [2]string{r.Session(), r.User()}
				}
				for _, tag := range r.Tags() {
					if strings.HasPrefix(tag, "session:") || strings.HasPrefix(tag, "user:") {
						t.Errorf("tag %q: sessions and users are fields, not tags", tag)
					}
				}
			}
			if g := got[trace.SpanID{1}]; g != tt.wantRoot {
				t.Errorf("root span: %q, want %q", g, tt.wantRoot)
			}
			if g := got[trace.SpanID{2}]; g != tt.wantChild {
				t.Errorf("child span: %q, want %q", g, tt.wantChild)
			}
		})
	}
}

// TestSessionExport: a recorded run's session and user are attributes of
// its invoke_agent span.
func TestSessionExport(t *testing.T) {
	tr := trace.New(trace.Options{})
	_, ec := tr.Start(t.Context(), "chat", trace.RunOptions{Session: "conv-1", User: "ada"})
	ec.End(trace.Text("hi"), nil)
	td, _, _ := Spans(ec.Records(), SpanOptions{})
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	for k, want := range map[string]string{AttrSession: "conv-1", AttrUser: "ada"} {
		if v, ok := sp.Attributes().Get(k); !ok || v.Str() != want {
			t.Errorf("span attribute %s = %v, want %s", k, v.AsString(), want)
		}
	}
	// And back: the span maps to a run of the same session.
	res := Map(td, &Options{})
	if r := res.Records[0]; r.Type != trace.TypeRunStart || r.Session() != "conv-1" || r.User() != "ada" {
		t.Errorf("imported back: %s session %q user %q", r.Type, r.Session(), r.User())
	}
}
