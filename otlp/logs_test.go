package otlp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loupe-dev/loupe/internal/golden"
	"github.com/loupe-dev/loupe/trace"
)

func decodeLogsFile(t testing.TB, path string) plog.Logs {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := DecodeLogsJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ld
}

// TestLogsGolden maps each OTLP/JSON logs file in testdata/logs and
// compares the records and the rejected log records with
// testdata/logs/NAME.golden.
func TestLogsGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/logs/*.json")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			res := MapLogs(decodeLogsFile(t, f), nil)
			var b bytes.Buffer
			fmt.Fprintf(&b, "logs: %d, as messages: %d\n", res.Logs, res.Messages)
			for _, e := range res.Rejected {
				fmt.Fprintf(&b, "rejected: %v\n", e)
			}
			for i := range res.Records {
				b.Write(res.Records[i].AppendJSON(nil))
				b.WriteByte('\n')
			}
			golden.CheckFile(t, filepath.Join("testdata", "logs", name+".golden"), b.Bytes())
			checkWellFormed(t, res.Records)
		})
	}
}

// deepLogs returns logs with one value of levels AnyValue levels in
// where: "resource", "scope", "attributes" or "body".
func deepLogs(where string, levels int, kvlist bool) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	sl := rl.ScopeLogs().AppendEmpty()
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTraceID([16]byte{1})
	lr.SetTimestamp(1)
	var v pcommon.Value
	switch where {
	case "resource":
		v = rl.Resource().Attributes().PutEmpty("deep")
	case "scope":
		v = sl.Scope().Attributes().PutEmpty("deep")
	case "attributes":
		v = lr.Attributes().PutEmpty("deep")
	case "body":
		v = lr.Body()
	default:
		panic(where)
	}
	for range levels - 1 {
		if kvlist {
			v = v.SetEmptyMap().PutEmpty("k")
		} else {
			v = v.SetEmptySlice().AppendEmpty()
		}
	}
	v.SetStr("x")
	return ld
}

// logsNesting returns how many AnyValue levels the deepest value of ld
// has (attributes of resources, scopes and log records, and bodies).
func logsNesting(ld plog.Logs) int {
	n := 0
	for _, rl := range ld.ResourceLogs().All() {
		n = max(n, mapNesting(rl.Resource().Attributes()))
		for _, sl := range rl.ScopeLogs().All() {
			n = max(n, mapNesting(sl.Scope().Attributes()))
			for _, lr := range sl.LogRecords().All() {
				n = max(n, mapNesting(lr.Attributes()), valueNesting(lr.Body()))
			}
		}
	}
	return n
}

func marshalLogs(t testing.TB, ld plog.Logs) (proto, js []byte) {
	t.Helper()
	var pm plog.ProtoMarshaler
	var jm plog.JSONMarshaler
	proto, err := pm.MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	js, err = jm.MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return proto, js
}

// TestLogsNestingLimit: values nested up to MaxNesting levels decode, one
// level more is refused before pdata sees it, in every place a value can
// be and in both encodings.
func TestLogsNestingLimit(t *testing.T) {
	for _, where := range []string{"resource", "scope", "attributes", "body"} {
		for _, kvlist := range []bool{false, true} {
			okProto, okJSON := marshalLogs(t, deepLogs(where, MaxNesting, kvlist))
			badProto, badJSON := marshalLogs(t, deepLogs(where, MaxNesting+1, kvlist))
			if ld, err := DecodeLogsProto(okProto); err != nil || logsNesting(ld) != MaxNesting {
				t.Errorf("%s (kvlist %v): %d levels in protobuf refused: %v", where, kvlist, MaxNesting, err)
			}
			if _, err := DecodeLogsJSON(okJSON); err != nil {
				t.Errorf("%s (kvlist %v): %d levels in JSON refused: %v", where, kvlist, MaxNesting, err)
			}
			if _, err := DecodeLogsProto(badProto); err == nil || !strings.Contains(err.Error(), "nested deeper") {
				t.Errorf("%s (kvlist %v): %d levels in protobuf: err %v, want nested deeper", where, kvlist, MaxNesting+1, err)
			}
			if _, err := DecodeLogsJSON(badJSON); err == nil {
				t.Errorf("%s (kvlist %v): %d levels in JSON let through", where, kvlist, MaxNesting+1)
			}
		}
	}
	// A million levels, a few megabytes: refused, not a crash.
	deep := pbLen(1, pbLen(2, pbLen(2, pbLen(6, nestedKV(1_000_000)))))
	if _, err := DecodeLogsProto(deep); err == nil {
		t.Error("a million levels let through")
	}
}

// FuzzLogsProtoNesting checks the protobuf guard on the logs schema
// against pdata's plog decoder: whatever the guard lets through must
// decode without panicking, and if it decodes, to values nested at most
// MaxNesting levels.
func FuzzLogsProtoNesting(f *testing.F) {
	ld := decodeLogsFile(f, "testdata/logs/genai.json")
	pb, _ := marshalLogs(f, ld)
	f.Add(pb)
	f.Add(cat(emptyGroup, pb))
	for _, n := range []int{0, 1, 2, 50, MaxNesting - 1, MaxNesting, MaxNesting + 1} {
		f.Add(pbLen(1, pbLen(1, pbLen(1, nestedKV(n)))))              // resource attribute
		f.Add(pbLen(1, pbLen(2, pbLen(2, pbLen(6, nestedKV(n))))))    // log attribute
		f.Add(pbLen(1, pbLen(1000, pbLen(2, pbLen(6, nestedKV(n)))))) // deprecated scope logs
		f.Add(pbLen(1, pbLen(2, pbLen(1, pbLen(3, nestedKV(n))))))    // scope attribute
		f.Add(cat(pbTag(99, 3), pbTag(1, 0), []byte{0}, pbLen(1, pbLen(2, pbLen(2, pbLen(6, nestedKV(n)))))))
	}
	for _, where := range []string{"resource", "scope", "attributes", "body"} {
		p, _ := marshalLogs(f, deepLogs(where, MaxNesting, false))
		f.Add(p)
		p, _ = marshalLogs(f, deepLogs(where, MaxNesting+1, true))
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkLogsProtoNesting(b) != nil {
			return
		}
		var u plog.ProtoUnmarshaler
		ld, err := u.UnmarshalLogs(b)
		if err != nil {
			return
		}
		if n := logsNesting(ld); n > MaxNesting {
			t.Errorf("the guard let through values nested %d levels deep", n)
		}
	})
}

// FuzzMapLogs decodes arbitrary bytes as OTLP/JSON and protobuf logs and
// maps what decodes: it must not panic, and every record must be one a
// store accepts, decoding back to itself.
func FuzzMapLogs(f *testing.F) {
	b, err := os.ReadFile("testdata/logs/genai.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	pb, _ := marshalLogs(f, decodeLogsFile(f, "testdata/logs/genai.json"))
	f.Add(pb)
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"01","spanId":"02","eventName":"gen_ai.choice","timeUnixNano":"1","body":{"stringValue":"x"}}]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, dec := range []func([]byte) (plog.Logs, error){DecodeLogsJSON, DecodeLogsProto} {
			ld, err := dec(b)
			if err != nil {
				continue
			}
			res := MapLogs(ld, &Options{MaxValueBytes: 256, MaxDepth: 4})
			checkWellFormed(t, res.Records)
		}
	})
}

// TestLogsWithSpans: a trace's spans and the logs written in them, mapped
// in either order, give the same records, with no seq used twice; the
// GenAI events hang under the model call they name; mapping the logs again
// gives the same records (a retry is deduplicated by the store).
func TestLogsWithSpans(t *testing.T) {
	spans := Map(decodeFile(t, "testdata/adk.json"), nil).Records
	logs := MapLogs(decodeLogsFile(t, "testdata/logs/genai.json"), nil).Records
	again := MapLogs(decodeLogsFile(t, "testdata/logs/genai.json"), nil).Records
	if len(logs) != len(again) {
		t.Fatalf("a second mapping made %d records, the first %d", len(again), len(logs))
	}
	for i := range logs {
		if !bytes.Equal(logs[i].AppendJSON(nil), again[i].AppendJSON(nil)) {
			t.Errorf("record %d differs on a second mapping:\n%s\n%s", i, logs[i].AppendJSON(nil), again[i].AppendJSON(nil))
		}
	}
	var tid trace.TraceID
	var both []trace.Record
	for _, r := range append(append([]trace.Record{}, spans...), logs...) {
		if tid.IsZero() {
			tid = r.TraceID
		}
		if r.TraceID == tid {
			both = append(both, r)
		}
	}
	checkWellFormed(t, both)
	// The model call of span 9000000000000003 holds the ADK messages.
	var call *trace.Node
	var walk func(ns []*trace.Node)
	walk = func(ns []*trace.Node) {
		for _, n := range ns {
			if n.Start.SpanID.String() == "9000000000000003" && n.Start.Type == trace.TypeModelCall {
				call = n
			}
			walk(n.Children)
		}
	}
	walk(trace.Tree(both))
	if call == nil {
		t.Fatal("no model call for span 9000000000000003")
	}
	var roles []string
	for _, c := range call.Children {
		if c.Start.Type == trace.TypeMessage {
			roles = append(roles, c.Start.Name)
		}
	}
	if strings.Join(roles, ",") != "system,user,assistant" {
		t.Errorf("messages under the model call: %v, want system,user,assistant", roles)
	}
}

// TestLogExport: a log record is exported as an event of its parent span.
func TestLogExport(t *testing.T) {
	tr := trace.New(trace.Options{})
	ctx, ec := tr.Start(context.Background(), "main", trace.RunOptions{})
	trace.Tool(ctx, "search", nil, func(ctx context.Context) (int, error) {
		ec.Log(trace.LogEntry{Name: "app", SeverityNumber: trace.SeverityWarn, Body: trace.Text("slow")})
		return 1, nil
	})
	ec.End(nil, nil)
	td, _, _ := Spans(ec.Records(), SpanOptions{Content: true})
	var found bool
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				for _, ev := range sp.Events().All() {
					if ev.Name() == "log" {
						found = true
						if sp.Name() != "invoke_agent main" || str(ev.Attributes(), "loupe.status") != "WARN" || !strings.Contains(str(ev.Attributes(), "loupe.output"), `"body":"slow"`) {
							t.Errorf("log event on %q: %v", sp.Name(), ev.Attributes().AsRaw())
						}
					}
				}
			}
		}
	}
	if !found {
		t.Error("no log event exported")
	}
}

// TestLogsExportedWithSpans: exported again (Spans), the records made
// from log records are events of the OTLP span they were written in, not
// spans of their own (but for a log that names no span).
func TestLogsExportedWithSpans(t *testing.T) {
	spans := Map(decodeFile(t, "testdata/adk.json"), nil).Records
	logs := MapLogs(decodeLogsFile(t, "testdata/logs/genai.json"), nil).Records
	tid := spans[0].TraceID
	var recs []trace.Record
	for _, r := range append(spans, logs...) {
		if r.TraceID == tid {
			recs = append(recs, r)
		}
	}
	in := decodeFile(t, "testdata/adk.json")
	td, _, _ := Spans(recs, SpanOptions{Content: true})
	// One more: the log that names no span is a zero-length span of its
	// own.
	if td.SpanCount() != in.SpanCount()+1 {
		t.Errorf("%d spans exported, want the %d received and one for the log without a span", td.SpanCount(), in.SpanCount())
	}
	events := map[string][]string{}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				for _, ev := range sp.Events().All() {
					events[sp.SpanID().String()] = append(events[sp.SpanID().String()], ev.Name()+" "+str(ev.Attributes(), "loupe.name"))
				}
			}
		}
	}
	if got := strings.Join(events["9000000000000003"], ","); got != "message system,message user,message assistant" {
		t.Errorf("events of the model span: %q", got)
	}
	if got := strings.Join(events["9000000000000004"], ","); !strings.Contains(got, "log weather.app") {
		t.Errorf("events of the tool span: %q", got)
	}
}
