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

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loupe-dev/loupe/trace"
)

// This file maps OTLP log records to Loupe records (docs/otlp-mapping.md,
// "Logs").
//
// A log record that names a span (its trace id and span id) and is one of
// the GenAI content events — gen_ai.client.inference.operation.details
// (its gen_ai.system_instructions, gen_ai.input.messages and
// gen_ai.output.messages attributes), gen_ai.system.message,
// gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message and
// gen_ai.choice, as OpenTelemetry's GenAI conventions and Google ADK emit
// them — becomes message records under that span: the call's messages.
// Every other log record with a trace id becomes one log record
// (trace.TypeLog) of its trace, under the span it names, or at the top of
// the trace when it names none. A log record without a trace id belongs to
// no trace, and is rejected.
//
// Records of a log record get seqs and span ids derived from the log
// record alone (its span, time, event name, severity, body and
// attributes), as the records of a span do (see Seq): mapping the same
// log record twice gives the same records, which a store keeps once; they
// sort by time among the span's own records; and the order in which logs
// and spans arrive does not matter, since neither changes the records of
// the other.

// LogError says why one log record was rejected.
type LogError struct {
	Resource, Scope, Log int // indexes in the request
	Err                  error
}

// Error names the log record and the problem.
func (e *LogError) Error() string {
	return fmt.Sprintf("resourceLogs[%d].scopeLogs[%d].logRecords[%d]: %v", e.Resource, e.Scope, e.Log, e.Err)
}

// Unwrap returns the reason.
func (e *LogError) Unwrap() error { return e.Err }

// LogsResult is what MapLogs made of a batch of log records.
type LogsResult struct {
	Records  []trace.Record // the records of the accepted log records, in request order
	Logs     int            // log records accepted
	Messages int            // of which GenAI content events mapped to message records
	Rejected []*LogError    // log records rejected, in request order
}

// DecodeLogsJSON decodes an OTLP/JSON logs document ({"resourceLogs": …}),
// as sent to /v1/logs with Content-Type application/json, behind the
// same nesting guard as DecodeJSON.
func DecodeLogsJSON(b []byte) (plog.Logs, error) {
	var u plog.JSONUnmarshaler
	return decode(b, checkJSONNesting, u.UnmarshalLogs, "OTLP/JSON", " logs")
}

// DecodeLogsProto decodes an OTLP protobuf ExportLogsServiceRequest (or
// LogsData, which has the same encoding), behind the same nesting guard
// as DecodeProto.
func DecodeLogsProto(b []byte) (plog.Logs, error) {
	var u plog.ProtoUnmarshaler
	return decode(b, checkLogsProtoNesting, u.UnmarshalLogs, "OTLP protobuf", " logs")
}

// MapLogs turns every log record of ld into records (see the comment at
// the top of this file). Log records without a trace id, or without a
// time (neither timeUnixNano nor observedTimeUnixNano), are rejected and
// reported. ld is modified: over-long and over-nested values are
// truncated in place, as Map does. MapLogs never panics on any input
// pdata can decode.
func MapLogs(ld plog.Logs, o *Options) LogsResult {
	var res LogsResult
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		limitMap(rl.Resource().Attributes(), o, 0)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			limitMap(sl.Scope().Attributes(), o, 0)
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if err := checkLog(lr); err != nil {
					res.Rejected = append(res.Rejected, &LogError{Resource: i, Scope: j, Log: k, Err: err})
					continue
				}
				limitMap(lr.Attributes(), o, 0)
				limitVal(lr.Body(), o, 0)
				var msgs bool
				res.Records, msgs = mapLog(res.Records, sl, lr, o)
				res.Logs++
				if msgs {
					res.Messages++
				}
			}
		}
	}
	return res
}

// ErrLogWithoutTrace is why a log record without a trace id is rejected.
var ErrLogWithoutTrace = errors.New("traceId is missing or all zeros: Loupe keeps a log record as part of the trace it was written in; emit it inside a span (or send logs without a trace to a log backend)")

func checkLog(lr plog.LogRecord) error {
	switch {
	case lr.TraceID().IsEmpty():
		return ErrLogWithoutTrace
	case lr.Timestamp() == 0 && lr.ObservedTimestamp() == 0:
		return errors.New("timeUnixNano and observedTimeUnixNano are both missing; a log record needs a time")
	case lr.Timestamp() > maxTime || lr.ObservedTimestamp() > maxTime:
		return errors.New("times are after the year 2261, which nanosecond timestamps do not hold")
	}
	return nil
}

// logEventName is the log record's event name: the eventName field, else
// the event.name attribute older SDKs set.
func logEventName(lr plog.LogRecord) string {
	if n := lr.EventName(); n != "" {
		return n
	}
	return str(lr.Attributes(), "event.name")
}

// mapLog appends the records of one log record, and reports whether they
// are messages (a GenAI content event).
func mapLog(dst []trace.Record, sl plog.ScopeLogs, lr plog.LogRecord, o *Options) ([]trace.Record, bool) {
	tid := trace.TraceID(lr.TraceID())
	sid := trace.SpanID(lr.SpanID())
	at := lr.Timestamp()
	if at == 0 {
		at = lr.ObservedTimestamp()
	}
	t := at.AsTime()
	event := logEventName(lr)
	var body trace.Value
	if lr.Body().Type() != pcommon.ValueTypeEmpty {
		body = valueJSON(lr.Body())
	}
	attrs := mapJSON(lr.Attributes())
	role := "log:" + strconv.FormatUint(logKey(lr, event, body, attrs), 16)
	s := &spanRecs{dst: dst, sid: sid, o: o}
	if !sid.IsZero() {
		if msgs := genAIMessages(event, lr, body); len(msgs) > 0 {
			for i, m := range msgs {
				s.add(trace.Record{TraceID: tid, SpanID: derived(tid, sid, role, i), ParentID: sid, Time: t,
					Type: trace.TypeMessage, Name: m.role, Output: m.content}, role, i)
			}
			return s.dst, true
		}
	}
	name := event
	if name == "" {
		name = sl.Scope().Name()
	}
	r := trace.LogEntry{Name: name, Severity: lr.SeverityText(), SeverityNumber: int(lr.SeverityNumber()),
		Body: body, Attributes: attrs, Time: t}.Record()
	r.TraceID, r.SpanID, r.ParentID = tid, derived(tid, sid, role, 0), sid
	s.add(r, role, 0)
	return s.dst, false
}

// logKey hashes what identifies a log record within its span: its time,
// event name, severity, body and attributes.
func logKey(lr plog.LogRecord, event string, body, attrs trace.Value) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(lr.Timestamp()))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(lr.ObservedTimestamp()))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(lr.SeverityNumber()))
	h.Write(b[:])
	for _, s := range [][]byte{[]byte(event), []byte(lr.SeverityText()), body, attrs} {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:])
		h.Write(s)
	}
	return h.Sum64()
}

// --- GenAI content events ------------------------------------------------

// message is one conversation message read from a GenAI event.
type message struct {
	role    string
	content trace.Value
}

// elided is what Google ADK sends for content it does not capture.
const elided = "<elided>"

// genAIMessages reads the messages of a GenAI content event; nil for any
// other log record, and for an event without content (capture off).
func genAIMessages(event string, lr plog.LogRecord, body trace.Value) []message {
	switch event {
	case "gen_ai.client.inference.operation.details":
		a := lr.Attributes()
		var out []message
		if v := firstJSON(a, "gen_ai.system_instructions"); v != nil {
			if c := partsContent(decodeJSON(v)); c != nil {
				out = append(out, message{"system", c})
			}
		}
		for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages"} {
			list, _ := decodeJSON(firstJSON(a, k)).([]any)
			for _, m := range list {
				if msg, ok := structuredMessage(m, "assistant"); ok {
					out = append(out, msg)
				}
			}
		}
		return out
	case "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message":
		role := strings.TrimSuffix(strings.TrimPrefix(event, "gen_ai."), ".message")
		if m, ok := eventMessage(decodeJSON(body), role); ok {
			return []message{m}
		}
	case "gen_ai.choice":
		b := decodeJSON(body)
		if obj, ok := b.(map[string]any); ok {
			if inner, ok := obj["message"]; ok { // the conventions' {"message": {...}}
				b = inner
			}
		}
		if m, ok := eventMessage(b, "assistant"); ok {
			return []message{m}
		}
	}
	return nil
}

// eventMessage reads the body of a per-message event: {"content": …,
// "role": …, "tool_calls": …} (the conventions), {"content": {"role": …,
// "parts": [...]}} (Google ADK, whose roles are Gemini's), or plain text.
func eventMessage(b any, role string) (message, bool) {
	switch x := b.(type) {
	case string:
		if x == "" || x == elided {
			return message{}, false
		}
		return message{role, trace.Text(x)}, true
	case map[string]any:
		if r, ok := x["role"].(string); ok && r != "" {
			role = r
		}
		c, has := x["content"]
		if inner, ok := c.(map[string]any); ok {
			if _, ok := inner["parts"]; ok { // a Gemini Content
				return structuredMessage(inner, role)
			}
		}
		if has && c != nil {
			if s, ok := c.(string); ok && (s == "" || s == elided) {
				return message{}, false
			}
			if _, ok := x["tool_calls"]; !ok {
				return message{normRole(role), encodeJSON(c)}, true
			}
		}
		rest := map[string]any{}
		for k, v := range x {
			if k != "role" && k != "index" && k != "finish_reason" && v != nil {
				rest[k] = v
			}
		}
		if len(rest) == 0 {
			return message{}, false
		}
		return message{normRole(role), encodeJSON(rest)}, true
	}
	return message{}, false
}

// structuredMessage reads a {"role": …, "parts": [...]} message.
func structuredMessage(m any, role string) (message, bool) {
	obj, ok := m.(map[string]any)
	if !ok {
		return message{}, false
	}
	if r, ok := obj["role"].(string); ok && r != "" {
		role = r
	}
	c := partsContent(obj["parts"])
	if c == nil {
		if v, ok := obj["content"]; ok && v != nil {
			c = encodeJSON(v)
		}
	}
	if c == nil {
		return message{}, false
	}
	return message{normRole(role), c}, true
}

// partsContent is a message's content from its parts: the text, when
// every part is text ({"type":"text","content":…} in the conventions,
// {"text":…} in Gemini's), else the parts as they are; nil for none.
func partsContent(p any) trace.Value {
	parts, ok := p.([]any)
	if !ok || len(parts) == 0 {
		return nil
	}
	var texts []string
	for _, x := range parts {
		part, _ := x.(map[string]any)
		if t, ok := textPart(part); ok {
			texts = append(texts, t)
			continue
		}
		return encodeJSON(parts)
	}
	return trace.Text(strings.Join(texts, "\n"))
}

// textPart returns the text of a part that is only text: the
// conventions' {"type":"text","content":…}, or Gemini's {"text":…} whose
// other fields are all null (ADK dumps them all; a thought is not text).
func textPart(part map[string]any) (string, bool) {
	if part["type"] == "text" {
		t, ok := part["content"].(string)
		return t, ok
	}
	t, ok := part["text"].(string)
	if !ok {
		return "", false
	}
	for k, v := range part {
		if k != "text" && v != nil {
			return "", false
		}
	}
	return t, true
}

// normRole maps Gemini's roles to the conventions': model is assistant,
// function is tool.
func normRole(r string) string {
	switch r {
	case "model":
		return "assistant"
	case "function":
		return "tool"
	case "":
		return "user"
	}
	return r
}

func decodeJSON(v trace.Value) any {
	if len(v) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if d.Decode(&x) != nil {
		return nil
	}
	return x
}

func encodeJSON(x any) trace.Value {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(x) != nil {
		return trace.Text(fmt.Sprint(x))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
