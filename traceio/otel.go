package traceio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// otelSpan is one OpenTelemetry span as the JavaScript SDK's ReadableSpan
// serializes (Fragola's file exporter), with the OTLP/JSON spellings
// accepted too: times as [seconds, nanoseconds] or *UnixNano, attributes
// as an object or as OTLP's key/value list.
type otelSpan struct {
	Name              string `json:"name"`
	TraceID           string `json:"traceId"`
	SpanID            string `json:"spanId"`
	ParentSpanID      string `json:"parentSpanId"`
	ParentID          string `json:"parentId"`
	ParentSpanContext *struct {
		SpanID string `json:"spanId"`
	} `json:"parentSpanContext"`
	StartTime         json.RawMessage `json:"startTime"`
	EndTime           json.RawMessage `json:"endTime"`
	StartTimeUnixNano json.RawMessage `json:"startTimeUnixNano"`
	EndTimeUnixNano   json.RawMessage `json:"endTimeUnixNano"`
	Attributes        json.RawMessage `json:"attributes"`
	Events            []struct {
		Name         string          `json:"name"`
		Attributes   json.RawMessage `json:"attributes"`
		Time         json.RawMessage `json:"time"`
		TimeUnixNano json.RawMessage `json:"timeUnixNano"`
	} `json:"events"`
	Status struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	} `json:"status"`
}

// readFragola reads OpenTelemetry spans, one JSON object per line.
//
// Trace and span ids are the spans' own (hex), so a trace imported from
// here and the same trace exported to an OpenTelemetry backend match.
// Records are numbered per trace in file order. A span without a parent is
// the run: run.start and run.end share its span id and carry its times,
// its attributes (as run.start's Input) and its status. A model
// invocation span (name containing "model", or gen_ai attributes) becomes
// a model.call — for a root span, under the run with a span id derived
// from the span's — with the model, tokens (gen_ai.usage.*) and error; a
// tool span becomes tool.start/tool.end (or tool.error); a nested run
// becomes child.spawn/child.end; anything else node.start/node.end.
// Exception events become error records (folded into the model.call or
// tool.error of a call span, whose Output then holds the exception);
// state update events become state.update records (Input the previous
// state, Output the new); other events become custom records named after
// the event, with their attributes as Output.
func readFragola(s *source) error {
	return s.lines(func(b []byte) error {
		var sp otelSpan
		if err := json.Unmarshal(b, &sp); err != nil {
			return jsonError(s.name, b, s.line, err)
		}
		tid, err := trace.ParseTraceID(sp.TraceID)
		if err != nil || tid.IsZero() {
			if err == nil {
				err = errors.New("is all zeros")
			}
			return s.errf("traceId", "%v", err)
		}
		sid, err := trace.ParseSpanID(sp.SpanID)
		if err != nil || sid.IsZero() {
			if err == nil {
				err = errors.New("missing or all zeros")
			}
			return s.errf("spanId", "%v", err)
		}
		parentHex, parentField := sp.ParentSpanID, "parentSpanId"
		if parentHex == "" {
			parentHex, parentField = sp.ParentID, "parentId"
		}
		if parentHex == "" && sp.ParentSpanContext != nil {
			parentHex, parentField = sp.ParentSpanContext.SpanID, "parentSpanContext.spanId"
		}
		parent, err := trace.ParseSpanID(parentHex)
		if err != nil {
			return s.errf(parentField, "%v", err)
		}
		start, err := otelTime(sp.StartTime, sp.StartTimeUnixNano)
		if err != nil {
			return s.errf("startTime", "%v", err)
		}
		if start.IsZero() {
			return s.errf("startTime", "missing; a span has a start time")
		}
		end, err := otelTime(sp.EndTime, sp.EndTimeUnixNano)
		if err != nil {
			return s.errf("endTime", "%v", err)
		}
		if end.Before(start) {
			end = start // an unended span: no duration rather than a negative one
		}
		attrs, err := otelAttrs(sp.Attributes)
		if err != nil {
			return s.errf("attributes", "%v", err)
		}
		code, err := otelStatus(sp.Status.Code)
		if err != nil {
			return s.errf("status.code", "%v", err)
		}
		attrJSON := attrs.json()
		d := end.Sub(start)

		// What happened: the failure, the kind of span.
		failed := code == 2
		errMsg := ""
		var exception trace.Value
		for _, e := range sp.Events {
			if e.Name == "exception" {
				ea, _ := otelAttrs(e.Attributes)
				exception = ea.json()
				if errMsg == "" {
					errMsg = ea.str("exception.message")
					if t := ea.str("exception.type"); t != "" && errMsg != "" && !strings.HasPrefix(errMsg, t) {
						errMsg = t + ": " + errMsg
					}
				}
			}
		}
		if sp.Status.Message != "" {
			errMsg = sp.Status.Message
		}
		if failed && errMsg == "" {
			errMsg = "span " + sp.Name + " failed"
		}
		if !failed {
			errMsg = ""
		}
		model := firstNonEmpty(attrs.str("gen_ai.response.model"), attrs.str("gen_ai.request.model"), attrs.str("fragola.agent.model"))
		lname := strings.ToLower(sp.Name)
		kind := "node"
		switch {
		case strings.Contains(lname, "model") || strings.Contains(lname, "llm") || attrs.str("gen_ai.operation.name") == "chat":
			kind = "model"
		case strings.Contains(lname, "tool"):
			kind = "tool"
		case strings.HasSuffix(lname, "run") || strings.HasSuffix(lname, "agent"):
			kind = "run"
		}
		if parent.IsZero() {
			// The run itself; a call span at the root gets a run around it.
			name := firstNonEmpty(attrs.str("fragola.agent.name"), sp.Name)
			tags := []string{"source:fragola", "otel.span:" + sp.Name}
			for _, k := range [][2]string{{"service", "service.name"}, {"agent.id", "fragola.agent.id"}, {"model", ""}} {
				v := model
				if k[1] != "" {
					v = attrs.str(k[1])
				}
				if v != "" {
					tags = append(tags, k[0]+":"+v)
				}
			}
			if err := s.emit(trace.Record{TraceID: tid, SpanID: sid, Time: start, Type: trace.TypeRunStart, Name: name, Input: attrJSON, Tags: tags}); err != nil {
				return err
			}
			callSpan := sid
			if kind == "model" || kind == "tool" {
				callSpan = spanIDOf(tid, "call", string(sid[:]))
			}
			if err := s.otelCall(&sp, kind, tid, callSpan, sid, start, d, attrs, model, errMsg, exception, sid != callSpan); err != nil {
				return err
			}
			status := trace.TerminationSuccess
			if failed {
				status = trace.TerminationError
			}
			return s.emit(trace.Record{TraceID: tid, SpanID: sid, Time: end, Type: trace.TypeRunEnd, Name: name,
				Duration: d, Status: string(status), Error: errMsg})
		}
		switch kind {
		case "model", "tool":
			return s.otelCall(&sp, kind, tid, sid, parent, start, d, attrs, model, errMsg, exception, false)
		}
		startType, endType := trace.TypeNodeStart, trace.TypeNodeEnd
		status := ""
		if kind == "run" {
			startType, endType = trace.TypeChildSpawn, trace.TypeChildEnd
			status = string(trace.TerminationSuccess)
			if failed {
				status = string(trace.TerminationError)
			}
		}
		if err := s.emit(trace.Record{TraceID: tid, SpanID: sid, ParentID: parent, Time: start, Type: startType,
			Name: sp.Name, Input: attrJSON}); err != nil {
			return err
		}
		if err := s.otelEvents(&sp, tid, sid, false); err != nil {
			return err
		}
		return s.emit(trace.Record{TraceID: tid, SpanID: sid, ParentID: parent, Time: end, Type: endType,
			Name: sp.Name, Duration: d, Status: status, Error: errMsg})
	})
}

// otelCall emits the records of a span: a model call or a tool call (with
// its events), or only the events of a run span (kind "run"/"node").
func (s *source) otelCall(sp *otelSpan, kind string, tid trace.TraceID, span, parent trace.SpanID, start time.Time, d time.Duration, attrs otelAttrMap, model, errMsg string, exception trace.Value, eventsUnderParent bool) error {
	evParent := span
	if eventsUnderParent {
		evParent = parent
	}
	switch kind {
	case "model":
		if err := s.otelEvents(sp, tid, evParent, errMsg != ""); err != nil {
			return err
		}
		r := trace.Record{TraceID: tid, SpanID: span, ParentID: parent, Time: start.Add(d), Type: trace.TypeModelCall,
			Name: firstNonEmpty(model, sp.Name), Duration: d, Input: attrs.json(), Error: errMsg,
			Status: attrs.str("gen_ai.response.finish_reasons")}
		r.Usage.Provider = firstNonEmpty(attrs.str("gen_ai.system"), attrs.str("gen_ai.provider.name"))
		r.Usage.InputTokens = max(attrs.num("gen_ai.usage.input_tokens"), 0)
		r.Usage.OutputTokens = max(attrs.num("gen_ai.usage.output_tokens"), 0)
		if errMsg != "" {
			r.Output = exception
		}
		return s.emit(r)
	case "tool":
		name := firstNonEmpty(attrs.str("gen_ai.tool.name"), attrs.str("fragola.tool.name"), attrs.str("tool.name"), sp.Name)
		if err := s.emit(trace.Record{TraceID: tid, SpanID: span, ParentID: parent, Time: start, Type: trace.TypeToolStart,
			Name: name, Input: attrs.json()}); err != nil {
			return err
		}
		if err := s.otelEvents(sp, tid, evParent, errMsg != ""); err != nil {
			return err
		}
		r := trace.Record{TraceID: tid, SpanID: span, ParentID: parent, Time: start.Add(d), Type: trace.TypeToolEnd, Name: name, Duration: d}
		if errMsg != "" {
			r.Type, r.Error, r.Output = trace.TypeToolError, errMsg, exception
		}
		return s.emit(r)
	}
	return s.otelEvents(sp, tid, span, false)
}

// otelEvents emits a span's events under parent; foldExceptions leaves out
// exception events, which the caller has folded into its call record.
func (s *source) otelEvents(sp *otelSpan, tid trace.TraceID, parent trace.SpanID, foldExceptions bool) error {
	var prev trace.Value
	for i, e := range sp.Events {
		field := fmt.Sprintf("events[%d]", i)
		t, err := otelTime(e.Time, e.TimeUnixNano)
		if err != nil {
			return s.errf(field+".time", "%v", err)
		}
		ea, err := otelAttrs(e.Attributes)
		if err != nil {
			return s.errf(field+".attributes", "%v", err)
		}
		r := trace.Record{TraceID: tid, SpanID: spanIDOf(tid, "event", sp.SpanID, strconv.Itoa(i)), ParentID: parent,
			Time: t, Name: e.Name, Output: ea.json()}
		switch {
		case e.Name == "exception":
			if foldExceptions {
				continue
			}
			r.Type, r.Name = trace.TypeError, ""
			r.Error = firstNonEmpty(ea.str("exception.message"), ea.str("exception.type"), "exception")
		case strings.Contains(strings.ToLower(e.Name), "stateupdate"):
			r.Type, r.Input = trace.TypeStateUpdate, prev
			prev = r.Output
		default:
			r.Type = trace.TypeCustom
		}
		if r.Time.IsZero() {
			return s.errf(field+".time", "missing; an event has a time")
		}
		if err := s.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// otelTime reads an OpenTelemetry time: [seconds, nanoseconds] (JS SDK
// HrTime), or Unix nanoseconds as a number or a string (OTLP/JSON).
func otelTime(hr, unixNano json.RawMessage) (time.Time, error) {
	hr = bytes.TrimSpace(hr)
	if len(hr) > 0 && hr[0] == '[' {
		var p []json.Number
		if err := json.Unmarshal(hr, &p); err != nil || len(p) != 2 {
			return time.Time{}, errors.New("want [seconds, nanoseconds]")
		}
		sec, err1 := p[0].Int64()
		ns, err2 := p[1].Int64()
		if err1 != nil || err2 != nil || sec < 0 || ns < 0 || ns >= 1e9 || sec > 1<<40 {
			return time.Time{}, fmt.Errorf("want [seconds, nanoseconds] as whole numbers, got [%s, %s]", p[0], p[1])
		}
		return time.Unix(sec, ns).UTC(), nil
	}
	if len(hr) > 0 && string(hr) != "null" {
		return parseTime(hr)
	}
	unixNano = bytes.TrimSpace(unixNano)
	if len(unixNano) == 0 || string(unixNano) == "null" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(strings.Trim(string(unixNano), `"`), 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("want Unix nanoseconds, got %s", unixNano)
	}
	return time.Unix(0, n).UTC(), nil
}

// otelStatus reads a status code: 0 unset, 1 ok, 2 error, as a number or
// as OTLP's STATUS_CODE_* name.
func otelStatus(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch strings.ToUpper(s) {
		case "STATUS_CODE_UNSET", "UNSET", "":
			return 0, nil
		case "STATUS_CODE_OK", "OK":
			return 1, nil
		case "STATUS_CODE_ERROR", "ERROR":
			return 2, nil
		}
		return 0, fmt.Errorf("unknown status %q (want 0, 1, 2 or STATUS_CODE_*)", s)
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 || n > 2 {
		return 0, fmt.Errorf("want 0 (unset), 1 (ok) or 2 (error), got %s", raw)
	}
	return n, nil
}

// otelAttrMap is a span's attributes, in file order.
type otelAttrMap []member

// otelAttrs reads attributes as an object or as OTLP's
// [{"key": k, "value": {"stringValue": …}}] list.
func otelAttrs(raw json.RawMessage) (otelAttrMap, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '{' {
		m, err := members(raw, 0)
		return otelAttrMap(m), err
	}
	var list []struct {
		Key   string                     `json:"key"`
		Value map[string]json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("want an object or a list of {key, value}, got %s", kindOf(raw))
	}
	out := make(otelAttrMap, 0, len(list))
	for _, kv := range list {
		var v json.RawMessage = []byte("null")
		for _, k := range []string{"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"} {
			if x, ok := kv.Value[k]; ok {
				v = x
				if k == "intValue" { // OTLP/JSON writes int64 as a string
					v = bytes.Trim(x, `"`)
					if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
						v = x
					}
				}
				break
			}
		}
		out = append(out, member{key: kv.Key, raw: v})
	}
	return out, nil
}

func (a otelAttrMap) get(k string) json.RawMessage {
	for _, m := range a {
		if m.key == k {
			return m.raw
		}
	}
	return nil
}

// str returns attribute k as text ("" if absent).
func (a otelAttrMap) str(k string) string { return textOf(a.get(k)) }

// num returns attribute k as an integer (0 if absent or not one).
func (a otelAttrMap) num(k string) int64 {
	n, _ := strconv.ParseInt(strings.Trim(string(a.get(k)), `"`), 10, 64)
	return n
}

// json returns the attributes as one JSON object, in file order.
func (a otelAttrMap) json() trace.Value {
	if len(a) == 0 {
		return nil
	}
	b := []byte{'{'}
	for i, m := range a {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(m.key)
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, bytes.TrimSpace(m.raw)...)
	}
	return append(b, '}')
}
