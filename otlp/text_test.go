package otlp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// companion maps td and returns the companion record of its span named
// name.
func companion(t testing.TB, td ptrace.Traces, name string) trace.Record {
	t.Helper()
	res := Map(td, nil)
	for _, r := range res.Records {
		if r.Type != trace.TypeCustom || r.Name != SpanRecordName {
			continue
		}
		var found bool
		w := textWalker{b: r.Output}
		w.object(partDoc, 0)
		for l := range strings.SplitSeq(w.out.String(), "\n") {
			found = found || l == name
		}
		if found {
			return r
		}
	}
	t.Fatalf("no companion record of span %q in %d records", name, len(res.Records))
	return trace.Record{}
}

// oneSpan returns traces holding one span named name, with resource and
// event attributes that SpanText leaves out, after set has added to it.
func oneSpan(name string, set func(sp ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "resource-only")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("scope-only")
	sp := ss.Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetTraceID(pcommon.TraceID{1, 2, 3})
	sp.SetSpanID(pcommon.SpanID{4, 5, 6})
	sp.SetStartTimestamp(pcommon.Timestamp(1_763_888_400_000_000_000))
	sp.SetEndTimestamp(pcommon.Timestamp(1_763_888_401_000_000_000))
	ev := sp.Events().AppendEmpty()
	ev.SetName("event-only")
	ev.Attributes().PutStr("note", "event attribute")
	set(sp)
	return td
}

func TestSpanText(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(sp ptrace.Span)
		want string
	}{
		{"no attributes", func(ptrace.Span) {}, "no attributes"},
		{"scalars", func(sp ptrace.Span) {
			a := sp.Attributes()
			a.PutStr("customer.id", "cust-4711")
			a.PutInt("http.status_code", 503)
			a.PutDouble("score", 0.25)
			a.PutBool("cached", true)
			a.PutStr("blank", "  ")
			a.PutStr("quoted", `say "hi"`+"\n\tthere")
			a.PutEmptyBytes("raw").FromRaw([]byte("bytes"))
		}, "scalars\ncust-4711\n503\n0.25\nsay \"hi\"\n\tthere"},
		{"nested", func(sp ptrace.Span) {
			arr := sp.Attributes().PutEmptySlice("tags")
			arr.AppendEmpty().SetStr("red")
			arr.AppendEmpty().SetInt(7)
			m := sp.Attributes().PutEmptyMap("order")
			m.PutStr("status", "shipped")
			m.PutEmptyMap("to").PutStr("city", "Lyon")
		}, "nested\nred\n7\nshipped\nLyon"},
		{"status", func(sp ptrace.Span) {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("refunds need approval")
		}, "status\nrefunds need approval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := companion(t, oneSpan(tc.name, tc.set), tc.name)
			got, ok := SpanText(&r)
			if !ok || got != tc.want {
				t.Errorf("SpanText = %q, %v; want %q, true", got, ok, tc.want)
			}
		})
	}
}

// TestSpanTextDepth: values nested deeper than DefaultMaxDepth are left
// out (Map never writes them; a document from elsewhere may), and the text
// stops there without failing.
func TestSpanTextDepth(t *testing.T) {
	doc := `{"stringValue":"end"}`
	for d := DefaultMaxDepth + 3; d >= 0; d-- {
		doc = fmt.Sprintf(`{"kvlistValue":{"values":[{"key":"v","value":{"stringValue":"level%d"}},{"key":"m","value":%s}]}}`, d, doc)
	}
	doc = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"deep","attributes":[{"key":"m","value":` + doc + `}]}]}]}]}`
	r := trace.Record{Type: trace.TypeCustom, Name: SpanRecordName, Output: trace.Raw([]byte(doc))}
	got, _ := SpanText(&r)
	want := "deep"
	for d := range DefaultMaxDepth {
		want += fmt.Sprintf("\nlevel%d", d)
	}
	if got != want {
		t.Errorf("SpanText = %q, want %q", got, want)
	}
}

// TestSpanTextGenAI: the companions of the GenAI fixture keep their
// attribute values and none of the OTLP structure.
func TestSpanTextGenAI(t *testing.T) {
	td := decodeFile(t, "testdata/genai.json")
	var all strings.Builder
	for _, r := range Map(td, nil).Records {
		text, ok := SpanText(&r)
		if isComp := r.Type == trace.TypeCustom && r.Name == SpanRecordName; ok != isComp {
			t.Errorf("%s %s: ok = %v", r.Type, r.Name, ok)
		}
		if ok && len(text) >= len(r.Output) {
			t.Errorf("companion text %d bytes, its span %d", len(text), len(r.Output))
		}
		all.WriteString(text + "\n")
	}
	for _, want := range []string{"invoke_agent support", "conv-42", "lookup_order", "812", `"content":"Where is order 17?"`, `{"status":"shipped"}`} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("companion text lacks %q", want)
		}
	}
	for _, not := range []string{"stringValue", "traceId", "startTimeUnixNano", "support-bot", "PermissionError: refunds"} {
		if strings.Contains(all.String(), not) {
			t.Errorf("companion text has %q", not)
		}
	}
}

// TestSpanTextNotASpan: a companion whose output is not an OTLP/JSON
// document is searched by its output's text, as any other record.
func TestSpanTextNotASpan(t *testing.T) {
	for _, out := range []string{`"a plain note"`, `[1,2]`, `{"resourceSpans":"x"}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x"]}]}]}`} {
		r := trace.Record{Type: trace.TypeCustom, Name: SpanRecordName, Output: trace.Raw([]byte(out))}
		got, ok := SpanText(&r)
		if want := r.Output.Text(); !ok || got != want {
			t.Errorf("SpanText(%s) = %q, %v; want %q, true", out, got, ok, want)
		}
	}
	r := trace.Record{Type: trace.TypeCustom, Name: "other", Output: trace.Text("x")}
	if _, ok := SpanText(&r); ok {
		t.Error("SpanText of a record that is not a companion: ok")
	}
}

// FuzzSpanText reads arbitrary documents as a companion's output, which
// must not panic; and maps a span with a fuzzed attribute value, whose
// companion's text must hold the value.
func FuzzSpanText(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"n","attributes":[{"key":"k","value":{"stringValue":"v"}}]}]}]}]}`), "value")
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"value":{"kvlistValue":{"values":[{"value":{"arrayValue":{"values":[{"intValue":"1"}]}}}]}}}]}]}]}]}`), "a\\b\"c")
	f.Fuzz(func(t *testing.T, doc []byte, value string) {
		r := trace.Record{Type: trace.TypeCustom, Name: SpanRecordName, Output: trace.Raw(doc)}
		SpanText(&r)
		if !utf8.ValidString(value) || strings.TrimSpace(value) == "" || len(value) > 1000 {
			return
		}
		c := companion(t, oneSpan("fuzz", func(sp ptrace.Span) { sp.Attributes().PutStr("v", value) }), "fuzz")
		if got, _ := SpanText(&c); !strings.Contains(got, value) {
			t.Errorf("SpanText = %q, lacks %q", got, value)
		}
	})
}

// BenchmarkSpanText reads the text of the GenAI fixture's companion
// records: "walk" is SpanText, "decode" the same document decoded with
// encoding/json into the structs it needs, for comparison.
func BenchmarkSpanText(b *testing.B) {
	var comps []trace.Record
	for _, r := range Map(decodeFile(b, "testdata/genai.json"), nil).Records {
		if r.Type == trace.TypeCustom && r.Name == SpanRecordName {
			comps = append(comps, r)
		}
	}
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			for i := range comps {
				SpanText(&comps[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(comps)), "ns/span")
	})
	b.Run("decode", func(b *testing.B) {
		type kv struct {
			Value struct {
				StringValue *string         `json:"stringValue"`
				IntValue    json.RawMessage `json:"intValue"`
			} `json:"value"`
		}
		var doc struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						Name       string `json:"name"`
						Attributes []kv   `json:"attributes"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		for b.Loop() {
			for i := range comps {
				if err := json.Unmarshal(comps[i].Output, &doc); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(comps)), "ns/span")
	})
}
