// Package otlp maps OpenTelemetry spans to Loupe records and back. It
// decodes OTLP (protobuf and OTLP/JSON, with the OpenTelemetry collector's
// pdata module, which reads OTLP/JSON's hex ids correctly) and turns each
// span into typed trace.Records following the conventions it recognizes:
//
//   - the OpenTelemetry GenAI conventions, current (gen_ai.operation.name,
//     gen_ai.usage.input_tokens, gen_ai.input.messages with their parts,
//     gen_ai.system_instructions, …) and older (gen_ai.prompt.N.*,
//     gen_ai.completion.N.*, gen_ai.usage.prompt_tokens);
//   - OpenInference (openinference.span.kind, llm.model_name,
//     llm.token_count.*, llm.input_messages.N.message.*, tool.name,
//     input.value / output.value);
//   - the dialects of frameworks that export their own telemetry: the
//     Vercel AI SDK (ai.*), Pydantic AI and Logfire, Genkit (genkit:*),
//     Traceloop OpenLLMetry (traceloop.*), Google ADK
//     (gcp.vertex.agent.*), Strands Agents (content in events), Eino's
//     apmplus callback (gen_ai.span.kind), and what OpenLIT, Semantic
//     Kernel and OpenInference's framework instrumentations (OpenAI
//     Agents SDK, LangChain and LangGraph, CrewAI, smolagents, LlamaIndex)
//     add to the conventions above.
//
// A model span becomes a model.call, a tool span tool.start + tool.end (or
// tool.error), an agent span a run (run.start/run.end at the root,
// child.spawn/child.end below it), any other span node.start/node.end, and
// each span event a custom record. What a span is comes from what it says
// it is before what its attributes hint at (see dialect.go): a run span
// that carries its run's token totals is a run, not one more model call,
// and a model span around another model span of the same request (a
// framework's span around its client library's) is a step, the inner one
// the call. docs/otlp-mapping.md has the tables.
//
// OTLP log records map too (MapLogs, after DecodeLogsProto or
// DecodeLogsJSON): GenAI content events become the messages of the call
// they name, other log records trace.TypeLog records of their trace.
//
// # Nothing is lost
//
// Every span also gets one companion record: type custom, name "otel.span"
// (SpanRecordName), a span of its own under the span, whose Output is the
// span as OTLP/JSON with its resource and scope — ids, parent, kind,
// status, times, events, links, trace state, flags and every attribute.
// Traces rebuilds the exact spans from these records, so OTLP → Loupe →
// OTLP gives back the same spans.
//
// # Record identity
//
// A collector may see the spans of one trace in any order, in several
// requests, from several processes, and may see a request twice (a
// retry). Seq numbers are therefore derived from the span alone (see Seq):
// the time of the record in 16 µs steps above a 15-bit hash of the span id
// and the record's role. Mapping the same span twice gives the same
// records, which the store then deduplicates; records sort by time; and
// derived seqs (≥ 2^49 for anything after 2000) never meet the small seqs
// a Loupe recorder assigns.
package otlp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// SpanRecordName is the Name of the custom record that keeps a whole span
// (see the package documentation).
const SpanRecordName = "otel.span"

// DefaultMaxDepth bounds the nesting of attribute values (arrays and maps
// inside arrays and maps) when Options.MaxDepth is zero.
const DefaultMaxDepth = 16

// Options control Map. The zero value is ready to use.
type Options struct {
	// MaxValueBytes bounds each string or bytes attribute value and each
	// record Value; longer ones are replaced by the recorder's truncation
	// marker ({"$loupe":"truncated","bytes":N,"head":…}). Zero means
	// trace.DefaultMaxValueBytes; negative means no limit.
	MaxValueBytes int
	// MaxDepth bounds the nesting of attribute values; deeper values are
	// replaced by the string "<loupe: nested deeper than N>". Zero means
	// DefaultMaxDepth.
	MaxDepth int
}

func (o *Options) maxValue() int {
	if o == nil || o.MaxValueBytes == 0 {
		return trace.DefaultMaxValueBytes
	}
	return o.MaxValueBytes
}

func (o *Options) maxDepth() int {
	if o == nil || o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}

// SpanError says why one span was rejected.
type SpanError struct {
	Resource, Scope, Span int // indexes in the request
	Name                  string
	Err                   error
}

// Error names the span and the problem.
func (e *SpanError) Error() string {
	return fmt.Sprintf("resourceSpans[%d].scopeSpans[%d].spans[%d] (%q): %v", e.Resource, e.Scope, e.Span, e.Name, e.Err)
}

// Unwrap returns the reason.
func (e *SpanError) Unwrap() error { return e.Err }

// Result is what Map made of a batch of spans.
type Result struct {
	Records  []trace.Record // the records of the accepted spans, span by span
	Spans    int            // spans accepted
	Rejected []*SpanError   // spans rejected, in request order
}

// DecodeJSON decodes an OTLP/JSON document ({"resourceSpans": …}), as sent
// to /v1/traces with Content-Type application/json and as the OTel
// Collector's file exporter writes it (one document per line: use it per
// line).
func DecodeJSON(b []byte) (ptrace.Traces, error) {
	var u ptrace.JSONUnmarshaler
	return decode(b, checkJSONNesting, u.UnmarshalTraces, "OTLP/JSON", "")
}

// DecodeProto decodes an OTLP protobuf ExportTraceServiceRequest (or
// TracesData, which has the same encoding).
func DecodeProto(b []byte) (ptrace.Traces, error) {
	var u ptrace.ProtoUnmarshaler
	return decode(b, checkProtoNesting, u.UnmarshalTraces, "OTLP protobuf", "")
}

// decode runs an OTLP request's nesting guard, then pdata's decoder, and
// says which failed: format is "OTLP/JSON" or "OTLP protobuf", signal ""
// for traces or " logs".
func decode[T any](b []byte, guard func([]byte) error, unmarshal func([]byte) (T, error), format, signal string) (T, error) {
	var zero T
	if err := guard(b); err != nil {
		return zero, fmt.Errorf("not %s Loupe accepts: %w", format, err)
	}
	v, err := unmarshal(b)
	if err != nil {
		return zero, fmt.Errorf("not %s%s: %w", format, signal, err)
	}
	return v, nil
}

// Map turns every span of td into records. Spans with a zero trace or span
// id, or no start time, are rejected (and reported) rather than guessed
// at; the others are mapped whole. td is modified: over-long and
// over-nested attribute values are truncated in place. Map never panics
// on any input pdata can decode.
func Map(td ptrace.Traces, o *Options) Result {
	var res Result
	var spans []classified
	spans, res.Rejected = classify(td, o)
	for i := range spans {
		res.Records = mapSpan(res.Records, &spans[i], o)
	}
	res.Spans = len(spans)
	return res
}

// classify checks and limits every span of td and tells what each is (see
// dialect.go), first span by span and then, for model spans, by the spans
// under them (see nestedCalls). It returns the spans to map, in request
// order, and the spans rejected.
func classify(td ptrace.Traces, o *Options) ([]classified, []*SpanError) {
	var rejected []*SpanError
	spans := make([]classified, 0, td.SpanCount())
	calls := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		limitMap(rs.Resource().Attributes(), o, 0)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			limitMap(ss.Scope().Attributes(), o, 0)
			sps := ss.Spans()
			for k := 0; k < sps.Len(); k++ {
				sp := sps.At(k)
				if err := check(sp); err != nil {
					rejected = append(rejected, &SpanError{Resource: i, Scope: j, Span: k, Name: sp.Name(), Err: err})
					continue
				}
				limitSpan(sp, o)
				c := classified{rs: rs, ss: ss, sp: sp, m: scanMarks(sp.Attributes())}
				c.kind, c.d = c.m.classify(ss.Scope().Name(), sp.Name())
				if c.kind == KindModel {
					calls++
				}
				spans = append(spans, c)
			}
		}
	}
	if calls > 1 {
		nestedCalls(spans)
	}
	return spans, rejected
}

// classified is a span of a request and what it is.
type classified struct {
	rs   ptrace.ResourceSpans
	ss   ptrace.ScopeSpans
	sp   ptrace.Span
	m    marks
	kind Kind
	d    dialect
}

// nestedCalls makes a model span that has, directly under it in the same
// request, another model span carrying token counts a step: the same call
// seen twice, by a framework and by the client library under it
// (LangChain's ChatOpenAI span and the OpenAI instrumentation's, the
// OpenAI Agents SDK's response span and the OpenAI client's, LlamaIndex's
// achat_with_tools around achat). The innermost span is the call: it is
// the request the provider answered and carries its tokens, which the
// outer one would count again. An inner span without tokens (an attempt
// the outer span records) leaves both calls as they are: nothing is
// counted twice. Spans may come in any order.
func nestedCalls(spans []classified) {
	type key struct {
		tid trace.TraceID
		sid trace.SpanID
	}
	models := make(map[key]int, 8)
	for i := range spans {
		if spans[i].kind == KindModel {
			models[key{trace.TraceID(spans[i].sp.TraceID()), trace.SpanID(spans[i].sp.SpanID())}] = i
		}
	}
	var outer []int
	for _, i := range models {
		c := &spans[i]
		if !c.m.tokens || c.sp.ParentSpanID().IsEmpty() {
			continue
		}
		if p, ok := models[key{trace.TraceID(c.sp.TraceID()), trace.SpanID(c.sp.ParentSpanID())}]; ok && p != i {
			outer = append(outer, p)
		}
	}
	for _, p := range outer {
		spans[p].kind = KindGeneric
	}
}

func check(sp ptrace.Span) error {
	switch {
	case sp.TraceID().IsEmpty():
		return errors.New("traceId is missing or all zeros")
	case sp.SpanID().IsEmpty():
		return errors.New("spanId is missing or all zeros")
	case sp.StartTimestamp() == 0:
		return errors.New("startTimeUnixNano is missing; a span has a start time")
	case sp.StartTimestamp() > maxTime || sp.EndTimestamp() > maxTime:
		return errors.New("times are after the year 2261, which nanosecond timestamps do not hold")
	}
	return nil
}

// maxTime is the last nanosecond a store can hold (see store.ValidateRecord).
var maxTime = pcommon.Timestamp(time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC).UnixNano())

// --- Seq ---------------------------------------------------------------

// seqEpoch is where Seq's time steps start; times before it map to step 0.
var seqEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Seq returns the seq of the record that plays role (for example "start",
// "end", "event", "span") in the span sid at time t: (t − 2000-01-01) in 16
// µs steps, shifted left 15 bits, above 15 bits of an FNV-1a hash of the
// span id, the role and n (an index among records of that role). Steps
// reach beyond the year 2140; later times share the last step. It is never
// 0 and at most math.MaxInt64.
func Seq(t time.Time, sid trace.SpanID, role string, n int) uint64 {
	step := (t.UnixNano() - seqEpoch) / 16000
	step = min(max(step, 0), 1<<48-1)
	h := fnv.New64a()
	h.Write(sid[:])
	h.Write([]byte(role))
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], uint64(n))
	h.Write(nb[:])
	s := uint64(step)<<15 | h.Sum64()&0x7fff
	if s == 0 {
		s = 1
	}
	return s
}

// derived returns a span id made from sid and role, for records that need
// a span of their own (events, the companion record, the call inside a
// root span). It is never zero and never sid.
func derived(tid trace.TraceID, sid trace.SpanID, role string, n int) trace.SpanID {
	h := fnv.New64a()
	h.Write(tid[:])
	h.Write(sid[:])
	h.Write([]byte(role))
	h.Write([]byte(strconv.Itoa(n)))
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64())
	if id.IsZero() || id == sid {
		id[7] ^= 1
	}
	return id
}

// --- kinds -------------------------------------------------------------

// Kind is what Loupe makes of a span.
type Kind string

// Span kinds.
const (
	KindModel   Kind = "model"   // a model call
	KindTool    Kind = "tool"    // a tool call (retrievers and rerankers too)
	KindAgent   Kind = "agent"   // an agent run
	KindGeneric Kind = "generic" // anything else
)

// Classify tells what a span is from its attributes and which convention
// said so: "openinference", "gen_ai", "vercel_ai", "pydantic_ai",
// "genkit", "traceloop", "adk", "strands", "eino" or "" (none). It sees
// one span's attributes only, not its name, its scope or the spans under
// it, which Map also uses (Google ADK's older agent spans are known by
// their name only; Pydantic AI's, ADK's, Strands' and Eino's also by
// their scope; a model span around another is a step).
func Classify(attrs pcommon.Map) (Kind, string) {
	m := scanMarks(attrs)
	k, d := m.classify("", "")
	return k, dialectNames[d]
}

func has(m pcommon.Map, k string) bool { _, ok := m.Get(k); return ok }

// --- one span ------------------------------------------------------------

// spanRecs collects the records of one span and keeps their seqs strictly
// increasing in the order they are added, so that a span's start comes
// before its events and its end even when they share a time step.
type spanRecs struct {
	dst  []trace.Record
	last uint64
	sid  trace.SpanID
	o    *Options
}

func (s *spanRecs) add(r trace.Record, role string, n int) {
	max := s.o.maxValue()
	r.Input, r.Output, r.Thinking = limitValue(norm(r.Input), max), limitValue(norm(r.Output), max), limitValue(norm(r.Thinking), max)
	s.addWhole(r, role, n)
}

// addWhole adds r without limiting its values: for the companion record,
// whose attribute values were limited one by one.
func (s *spanRecs) addWhole(r trace.Record, role string, n int) {
	r.V = trace.Version
	// Protobuf strings are not checked for UTF-8 by the decoder; a record's
	// text must be valid to survive its own encoding.
	r.Name, r.Status, r.Error = validUTF8(r.Name), validUTF8(r.Status), validUTF8(r.Error)
	r.Usage.Provider = validUTF8(r.Usage.Provider)
	for _, t := range r.Tags() {
		if !utf8.ValidString(t) {
			ri := r.EditRun() // Run is shared with r's copies
			for i, t := range ri.Tags {
				ri.Tags[i] = validUTF8(t)
			}
			break
		}
	}
	r.Time = r.Time.UTC()
	r.Seq = Seq(r.Time, s.sid, role, n)
	if s.last != 0 && r.Seq <= s.last {
		r.Seq = s.last + 1
	}
	s.last = r.Seq
	s.dst = append(s.dst, r)
}

func mapSpan(dst []trace.Record, c *classified, o *Options) []trace.Record {
	rs, ss, sp, kind, dia := c.rs, c.ss, c.sp, c.kind, c.d
	tid := trace.TraceID(sp.TraceID())
	sid := trace.SpanID(sp.SpanID())
	parent := trace.SpanID(sp.ParentSpanID())
	attrs := sp.Attributes()
	start := sp.StartTimestamp().AsTime()
	end := sp.EndTimestamp().AsTime()
	if sp.EndTimestamp() < sp.StartTimestamp() {
		end = start // unended (or skewed): no duration rather than a negative one
	}
	d := end.Sub(start)
	v := read(kind, dia, &c.m, sp)
	errMsg := spanError(sp)
	if errMsg == "" {
		errMsg = v.errMsg
	}
	s := &spanRecs{dst: dst, sid: sid, o: o}
	in, out, name := v.in, v.out, v.name
	call := callSpan{tid: tid, sp: sp, kind: kind, name: name, start: start, end: end, errMsg: errMsg,
		in: v.in, out: v.out, thinking: v.thinking, usage: v.usage, finish: v.finish}

	if parent.IsZero() {
		// The root span is the run, whatever it is; a model or tool call at
		// the root gets a span of its own under the run.
		runIn, runOut := in, out
		if kind == KindModel || kind == KindTool {
			runIn, runOut = nil, nil
		}
		runName := name
		if kind == KindModel || kind == KindTool {
			runName = sp.Name()
		}
		s.add(trace.Record{TraceID: tid, SpanID: sid, Time: start, Type: trace.TypeRunStart, Name: runName,
			Input: runIn, Run: &trace.RunInfo{Tags: tags(rs, attrs)}}, "start", 0)
		if kind == KindModel || kind == KindTool {
			callRecs(s, &call, derived(tid, sid, "call", 0), sid)
		} else {
			events(s, tid, sid, sp)
		}
		status := trace.TerminationSuccess
		if errMsg != "" {
			status = trace.TerminationError
		}
		s.add(trace.Record{TraceID: tid, SpanID: sid, Time: end, Type: trace.TypeRunEnd, Name: runName,
			Duration: d, Status: string(status), Error: errMsg, Output: runOut}, "end", 0)
	} else {
		switch kind {
		case KindModel, KindTool:
			callRecs(s, &call, sid, parent)
		default:
			startT, endT, status := trace.TypeNodeStart, trace.TypeNodeEnd, ""
			if kind == KindAgent {
				startT, endT, status = trace.TypeChildSpawn, trace.TypeChildEnd, string(trace.TerminationSuccess)
				if errMsg != "" {
					status = string(trace.TerminationError)
				}
			}
			s.add(trace.Record{TraceID: tid, SpanID: sid, ParentID: parent, Time: start, Type: startT, Name: name, Input: in}, "start", 0)
			events(s, tid, sid, sp)
			s.add(trace.Record{TraceID: tid, SpanID: sid, ParentID: parent, Time: end, Type: endT, Name: name,
				Duration: d, Status: status, Error: errMsg, Output: out}, "end", 0)
		}
	}
	s.addWhole(trace.Record{TraceID: tid, SpanID: derived(tid, sid, "span", 0), ParentID: sid, Time: end,
		Type: trace.TypeCustom, Name: SpanRecordName, Output: spanJSON(rs, ss, sp)}, "span", 0)
	return withSession(s.dst, len(dst), rs.Resource().Attributes(), attrs)
}

// callSpan is what mapSpan has read of a model or tool span.
type callSpan struct {
	tid        trace.TraceID
	sp         ptrace.Span
	kind       Kind // KindModel or KindTool
	name       string
	start, end time.Time
	errMsg     string

	in, out, thinking trace.Value
	usage             trace.Usage
	finish            string
}

// callRecs adds the records of the call c in span id under parent. The
// span's events come between the call's start and its end.
func callRecs(s *spanRecs, c *callSpan, id, parent trace.SpanID) {
	tid, sp, name, in, out, errMsg := c.tid, c.sp, c.name, c.in, c.out, c.errMsg
	start, end := c.start, c.end
	d := end.Sub(start)
	if c.kind == KindModel {
		events(s, tid, trace.SpanID(sp.SpanID()), sp)
		r := trace.Record{TraceID: tid, SpanID: id, ParentID: parent, Time: end, Type: trace.TypeModelCall,
			Name: name, Duration: d, Input: in, Output: out, Thinking: c.thinking, Error: errMsg,
			Status: c.finish, Usage: c.usage}
		s.add(r, "end", 0)
		return
	}
	s.add(trace.Record{TraceID: tid, SpanID: id, ParentID: parent, Time: start, Type: trace.TypeToolStart, Name: name, Input: in}, "start", 1)
	events(s, tid, trace.SpanID(sp.SpanID()), sp)
	r := trace.Record{TraceID: tid, SpanID: id, ParentID: parent, Time: end, Type: trace.TypeToolEnd, Name: name, Duration: d, Output: out}
	if errMsg != "" {
		r.Type, r.Error = trace.TypeToolError, errMsg
	}
	s.add(r, "end", 1)
}

// events adds one custom record per span event, named after the event,
// with its attributes as Output, in a span of its own under the span.
func events(s *spanRecs, tid trace.TraceID, sid trace.SpanID, sp ptrace.Span) {
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		t := e.Timestamp().AsTime()
		if e.Timestamp() == 0 {
			t = sp.StartTimestamp().AsTime()
		}
		s.add(trace.Record{TraceID: tid, SpanID: derived(tid, sid, "event", i), ParentID: sid, Time: t,
			Type: trace.TypeCustom, Name: e.Name(), Output: mapJSON(e.Attributes())}, "event", i)
	}
}

// spanError returns the span's error message, or "" if it did not fail:
// the status message, else the first exception event's type and message,
// else error.type, else a generic message.
func spanError(sp ptrace.Span) string {
	if sp.Status().Code() != ptrace.StatusCodeError {
		return ""
	}
	if m := sp.Status().Message(); m != "" {
		return m
	}
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		if e.Name() != "exception" {
			continue
		}
		msg, typ := str(e.Attributes(), "exception.message"), str(e.Attributes(), "exception.type")
		switch {
		case msg != "" && typ != "" && !strings.HasPrefix(msg, typ):
			return typ + ": " + msg
		case msg != "":
			return msg
		case typ != "":
			return typ
		}
	}
	if t := str(sp.Attributes(), "error.type"); t != "" {
		return t
	}
	return "span " + strconv.Quote(sp.Name()) + " ended with status ERROR"
}

// ioValues returns what went in and came out of a span, by convention.
// sysInstr says the span has gen_ai.system_instructions, which go in front
// of gen_ai.input.messages as a system message.
func ioValues(kind Kind, sp ptrace.Span, sysInstr bool) (in, out trace.Value) {
	a := sp.Attributes()
	switch kind {
	case KindModel:
		in = firstJSON(a, "gen_ai.input.messages")
		if sysInstr {
			in = withSystem(in, a)
		}
		if in == nil {
			in = indexed(a, "gen_ai.prompt.")
		}
		if in == nil {
			in = indexed(a, "llm.input_messages.")
		}
		out = firstJSON(a, "gen_ai.output.messages")
		if out == nil {
			out = indexed(a, "gen_ai.completion.")
		}
		if out == nil {
			out = indexed(a, "llm.output_messages.")
		}
		// Older instrumentations put content in events.
		if in == nil || out == nil {
			ein, eout := eventMessages(sp)
			if in == nil {
				in = ein
			}
			if out == nil {
				out = eout
			}
		}
	case KindTool:
		in = firstJSON(a, "gen_ai.tool.call.arguments")
		out = firstJSON(a, "gen_ai.tool.call.result")
	case KindAgent:
		in = firstJSON(a, "gen_ai.input.messages")
		if sysInstr {
			in = withSystem(in, a)
		}
		out = firstJSON(a, "gen_ai.output.messages")
	}
	if in == nil {
		in = openInferenceValue(a, "input")
	}
	if out == nil {
		out = openInferenceValue(a, "output")
	}
	if kind == KindGeneric || kind == KindAgent {
		// OpenLIT's framework spans (invoke_workflow).
		if in == nil {
			in = firstJSON(a, "gen_ai.workflow.input")
		}
		if out == nil {
			out = firstJSON(a, "gen_ai.workflow.output")
		}
	}
	if kind == KindTool && out == nil {
		out = firstJSON(a, "retrieval.documents")
	}
	return in, out
}

// eventMessages reads GenAI content events: gen_ai.content.prompt /
// gen_ai.content.completion (gen_ai.prompt / gen_ai.completion
// attributes), gen_ai.client.inference.operation.details
// (gen_ai.input.messages / gen_ai.output.messages), and the per-message
// events gen_ai.{system,user,assistant,
// tool}.message and gen_ai.choice.
func eventMessages(sp ptrace.Span) (in, out trace.Value) {
	var msgs, choices []byte
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		a := e.Attributes()
		switch n := e.Name(); n {
		case "gen_ai.content.prompt":
			if in == nil {
				in = firstJSON(a, "gen_ai.prompt")
			}
		case "gen_ai.content.completion":
			if out == nil {
				out = firstJSON(a, "gen_ai.completion")
			}
		case evDetails:
			if in == nil {
				in = firstJSON(a, "gen_ai.input.messages")
			}
			if out == nil {
				out = firstJSON(a, "gen_ai.output.messages")
			}
		case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
			msgs = appendEventMessage(msgs, strings.TrimSuffix(strings.TrimPrefix(n, "gen_ai."), ".message"), a)
		case "gen_ai.choice":
			choices = appendEventMessage(choices, "", a)
		}
	}
	if in == nil && msgs != nil {
		in = append(msgs, ']')
	}
	if out == nil && choices != nil {
		out = append(choices, ']')
	}
	return in, out
}

func appendEventMessage(b []byte, role string, a pcommon.Map) []byte {
	if b == nil {
		b = []byte{'['}
	} else {
		b = append(b, ',')
	}
	b = append(b, '{')
	first := true
	if role != "" && !has(a, "role") {
		b = append(b, `"role":`...)
		b = trace.AppendString(b, role)
		first = false
	}
	a.Range(func(k string, v pcommon.Value) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = trace.AppendString(b, k)
		b = append(b, ':')
		// Strands and Semantic Kernel write a message's content blocks as
		// a JSON document in a string.
		if s := v.Str(); v.Type() == pcommon.ValueTypeStr && (k == "content" || k == "message") && jsonDoc(s) {
			b = append(b, norm(trace.Value(s))...)
			return true
		}
		b = appendValue(b, v, 1, DefaultMaxDepth)
		return true
	})
	return append(b, '}')
}

// jsonDoc tells whether s is a JSON object or array.
func jsonDoc(s string) bool {
	t := strings.TrimSpace(s)
	return t != "" && (t[0] == '[' || t[0] == '{') && json.Valid([]byte(t))
}

// openInferenceValue reads input.value / output.value: JSON when the
// mime type says so (or the text is JSON), text otherwise.
func openInferenceValue(a pcommon.Map, which string) trace.Value {
	v, ok := a.Get(which + ".value")
	if !ok {
		return nil
	}
	if v.Type() != pcommon.ValueTypeStr {
		return valueJSON(v)
	}
	if mt := str(a, which+".mime_type"); mt == "text/plain" {
		return trace.Text(v.Str())
	}
	return trace.Raw([]byte(v.Str()))
}

func finishReason(a pcommon.Map) string {
	v, ok := a.Get("gen_ai.response.finish_reasons")
	if !ok {
		// gen_ai.response.finish_reason: Semantic Kernel, Eino's apmplus;
		// llm.finish_reason: OpenInference.
		return firstStr(a, "gen_ai.completion.0.finish_reason", "llm.output_messages.0.message.finish_reason",
			"gen_ai.response.finish_reason", "llm.finish_reason")
	}
	if v.Type() == pcommon.ValueTypeSlice {
		var parts []string
		for i := 0; i < v.Slice().Len(); i++ {
			parts = append(parts, v.Slice().At(i).AsString())
		}
		return strings.Join(parts, ",")
	}
	return v.AsString()
}

// usage reads a model span's usage. A cost is unknown only when the span
// says so (loupe.usage.cost_unknown, written by Traces) and carries no
// cost; a span without either has a cost of 0 that the collector and
// `loupe traces import` price from the table.
func usage(a pcommon.Map) trace.Usage {
	u := trace.Usage{
		Provider:        firstStr(a, "gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"),
		InputTokens:     firstInt(a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt", "gen_ai.response.prompt_tokens"),
		OutputTokens:    firstInt(a, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion", "gen_ai.response.completion_tokens"),
		CachedTokens:    firstInt(a, "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens", "gen_ai.usage.cached_tokens", "llm.token_count.prompt_details.cache_read", "gen_ai.usage.prompt_tokens_details.cached_tokens"),
		ReasoningTokens: firstInt(a, "gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning", "gen_ai.usage.completion_tokens_details.reasoning_tokens"),
		CostUSD:         firstFloat(a, "gen_ai.usage.cost", "llm.cost.total"),
	}
	if v, ok := a.Get(AttrCostUnknown); ok && u.CostUSD == 0 {
		u.CostUnknown = v.Type() == pcommon.ValueTypeBool && v.Bool() || strings.EqualFold(strings.TrimSpace(v.AsString()), "true")
	}
	return u
}

// AttrCostUnknown is the span attribute (a bool) that says a model call's
// cost is unknown: its model has no price. OpenTelemetry's GenAI
// conventions have no such attribute, so Loupe writes its own; a span
// without it and without gen_ai.usage.cost has not been priced.
const AttrCostUnknown = "loupe.usage.cost_unknown"

// tags are run.start's tags for a root span: where it came from. (Its
// session and user are the records' own fields: withSession.)
func tags(rs ptrace.ResourceSpans, _ pcommon.Map) []string {
	t := []string{"source:otlp"}
	if s := str(rs.Resource().Attributes(), "service.name"); s != "" {
		t = append(t, "service:"+s)
	}
	return t
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// --- the companion record --------------------------------------------------

// spanJSON returns the span, its scope and its resource as one OTLP/JSON
// document holding only that span.
func spanJSON(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, sp ptrace.Span) trace.Value {
	td := ptrace.NewTraces()
	nrs := td.ResourceSpans().AppendEmpty()
	rs.Resource().CopyTo(nrs.Resource())
	nrs.SetSchemaUrl(rs.SchemaUrl())
	nss := nrs.ScopeSpans().AppendEmpty()
	ss.Scope().CopyTo(nss.Scope())
	nss.SetSchemaUrl(ss.SchemaUrl())
	sp.CopyTo(nss.Spans().AppendEmpty())
	var m ptrace.JSONMarshaler
	b, err := m.MarshalTraces(td)
	if err != nil {
		return trace.Text("<loupe: span not encodable: " + err.Error() + ">")
	}
	return trace.Raw(bytes.TrimSpace(b))
}
