package otlp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// FuzzMap decodes arbitrary bytes as OTLP/JSON and as protobuf and maps
// what decodes: it must not panic, and every record must be one a store
// accepts, decoding back to itself.
func FuzzMap(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	var pm ptrace.ProtoMarshaler
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if td, err := DecodeJSON(b); err == nil {
			if pb, err := pm.MarshalTraces(td); err == nil {
				f.Add(pb)
			}
		}
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":"02"}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range []func([]byte) (ptrace.Traces, error){DecodeJSON, DecodeProto} {
			td, err := dec(b)
			if err != nil {
				continue
			}
			res := Map(td, &Options{MaxValueBytes: 256, MaxDepth: 4})
			checkWellFormed(t, res.Records)
			if _, err := Traces(res.Records); err != nil {
				t.Errorf("companion records do not decode: %v", err)
			}
		}
	})
}

// fixtures returns the OTLP/JSON documents in testdata and, for each, the
// same traces as OTLP protobuf.
func fixtures(f *testing.F) (docs, protos [][]byte) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		f.Fatal(files, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			f.Fatal(err)
		}
		docs, protos = append(docs, b), append(protos, marshalProto(f, td))
	}
	return docs, protos
}

// FuzzProtoNesting checks the protobuf guard against pdata's decoder:
// whatever the guard lets through must decode without panicking, and if
// it decodes, to attribute values nested at most MaxNesting levels.
func FuzzProtoNesting(f *testing.F) {
	_, protos := fixtures(f)
	for _, b := range protos {
		f.Add(b)
		f.Add(cat(emptyGroup, b))
	}
	for _, n := range []int{0, 1, 2, 50, MaxNesting - 1, MaxNesting, MaxNesting + 1} {
		f.Add(nestedProto(n))
		f.Add(cat(emptyGroup, nestedProto(n)))
		f.Add(cat(pbTag(99, 3), pbTag(1, 0), []byte{0}, nestedProto(n)))
		f.Add(pbLen(1, pbLen(1000, pbLen(2, pbLen(9, nestedKV(n))))))
		f.Add(pbLen(1, pbLen(1<<32|1, pbLen(1, nestedKV(n)))))
	}
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		f.Add(marshalProto(f, deepTraces(where, MaxNesting-1, false)))
		f.Add(marshalProto(f, deepTraces(where, MaxNesting, true)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkProtoNesting(b) != nil {
			return
		}
		var u ptrace.ProtoUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			return
		}
		if n := maxNesting(td); n > MaxNesting {
			t.Errorf("the guard let through attribute values nested %d levels deep", n)
		}
	})
}

// FuzzJSONNesting checks the OTLP/JSON guard against encoding/json and
// pdata's decoder: it must refuse all invalid JSON, and call only that
// malformed; whatever it lets through must decode without panicking, and
// if it decodes, to attribute values nested at most MaxNesting levels.
func FuzzJSONNesting(f *testing.F) {
	docs, _ := fixtures(f)
	for _, b := range docs {
		f.Add(b)
	}
	for _, n := range []int{0, 1, 2, 50, MaxNesting - 1, MaxNesting, MaxNesting + 1} {
		f.Add(nestedJSON(n))
		f.Add([]byte(strings.ReplaceAll(string(nestedJSON(n)), `"arrayValue"`, `"\u0061rrayValue"`)))
	}
	for _, n := range []int{1, 5, MaxNesting + 1} {
		f.Add(bracketlessJSON(n))
		f.Add(afterErrorJSON(n))
	}
	for _, where := range []string{"resource", "scope", "span", "event", "link"} {
		f.Add(marshalJSON(f, deepTraces(where, MaxNesting-1, false)))
		f.Add(marshalJSON(f, deepTraces(where, MaxNesting-1, true)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkJSONNesting(b)
		switch valid := json.Valid(b); {
		case valid && err != nil && strings.HasPrefix(err.Error(), "malformed JSON"):
			t.Fatalf("valid JSON refused: %v", err)
		case !valid && err == nil:
			t.Fatal("invalid JSON let through")
		}
		if err != nil {
			return
		}
		var u ptrace.JSONUnmarshaler
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			return
		}
		if n := maxNesting(td); n > MaxNesting {
			t.Errorf("the guard let through attribute values nested %d levels deep", n)
		}
	})
}

// FuzzMapAttributes maps spans built from arbitrary attributes, so that
// the fuzzer reaches the dialect readers (the kinds, the JSON documents in
// attributes and events, the nested-call rule) rather than the decoder.
// text describes up to four spans, each the child of the one before,
// separated by "\n---\n": one "key=value" line per attribute (an integer
// value becomes an int attribute), "@name" starts an event whose
// attributes follow, "!error" sets the status to ERROR. It is seeded with
// every span of the fixtures.
func FuzzMapAttributes(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		td, err := DecodeJSON(b)
		if err != nil {
			f.Fatal(err)
		}
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				ss := rss.At(i).ScopeSpans().At(j)
				var prev string
				for k := 0; k < ss.Spans().Len(); k++ {
					sp := ss.Spans().At(k)
					text := spanText(sp)
					f.Add(ss.Scope().Name(), sp.Name(), text)
					if prev != "" {
						f.Add(ss.Scope().Name(), sp.Name(), prev+"\n---\n"+text)
					}
					prev = text
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, scope, name, text string) {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		ss.Scope().SetName(scope)
		for i, part := range strings.SplitN(text, "\n---\n", 4) {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{1})
			sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
			if i > 0 {
				sp.SetParentSpanID(pcommon.SpanID{byte(i)})
			}
			sp.SetName(name)
			sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + i))
			sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_001_000_000_000 - i))
			attrs := sp.Attributes()
			for _, line := range strings.Split(part, "\n") {
				switch {
				case line == "!error":
					sp.Status().SetCode(ptrace.StatusCodeError)
				case strings.HasPrefix(line, "@"):
					ev := sp.Events().AppendEmpty()
					ev.SetName(line[1:])
					attrs = ev.Attributes()
				default:
					k, v, _ := strings.Cut(line, "=")
					if n, err := strconv.ParseInt(v, 10, 64); err == nil {
						attrs.PutInt(k, n)
					} else {
						attrs.PutStr(k, v)
					}
				}
			}
		}
		for _, o := range []*Options{nil, {MaxValueBytes: 64, MaxDepth: 2}} {
			td2 := ptrace.NewTraces()
			td.CopyTo(td2)
			res := Map(td2, o)
			if res.Spans != td.SpanCount() {
				t.Fatalf("%d of %d spans mapped: %v", res.Spans, td.SpanCount(), res.Rejected)
			}
			checkWellFormed(t, res.Records)
			calls := 0
			for _, r := range res.Records {
				if r.Type == trace.TypeModelCall {
					calls++
				}
			}
			if calls > res.Spans {
				t.Errorf("%d model calls from %d spans", calls, res.Spans)
			}
			if _, err := Traces(res.Records); err != nil {
				t.Errorf("companion records do not decode: %v", err)
			}
		}
	})
}

// spanText writes a span's attributes and events as FuzzMapAttributes
// reads them.
func spanText(sp ptrace.Span) string {
	var b strings.Builder
	line := func(k string, v pcommon.Value) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(v.AsString(), "\n", " "))
		b.WriteByte('\n')
	}
	sp.Attributes().Range(func(k string, v pcommon.Value) bool { line(k, v); return true })
	if sp.Status().Code() == ptrace.StatusCodeError {
		b.WriteString("!error\n")
	}
	for i := 0; i < sp.Events().Len(); i++ {
		e := sp.Events().At(i)
		b.WriteString("@" + e.Name() + "\n")
		e.Attributes().Range(func(k string, v pcommon.Value) bool { line(k, v); return true })
	}
	return strings.TrimSuffix(b.String(), "\n")
}
