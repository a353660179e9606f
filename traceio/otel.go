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
		o, err := s.otelSpanOf(&sp)
		if err != nil {
			return err
		}
		if o.parent.IsZero() {
			return s.otelRun(o)
		}
		switch o.kind {
		case "model", "tool":
			return s.otelCall(o, o.sid, o.parent, false)
		}
		return s.otelNode(o)
	})
}

// otelRead is one span, checked and interpreted: its ids and times, its
// attributes, whether and how it failed, and what kind of span it is.
type otelRead struct {
	sp          *otelSpan
	tid         trace.TraceID
	sid, parent trace.SpanID // parent is zero for a root span
	start, end  time.Time    // end is never before start
	attrs       otelAttrMap

	failed    bool        // status code 2 (ERROR)
	errMsg    string      // the failure's message; empty unless failed
	exception trace.Value // the attributes of the last exception event

	model string // the model the span names, if any
	kind  string // "model", "tool", "run" or "node"; see otelKind
}

// d is the span's duration.
func (o *otelRead) d() time.Duration { return o.end.Sub(o.start) }

// otelSpanOf checks the span's ids, times, attributes and status, in that
// order, reporting the first field that is wrong, and interprets them.
func (s *source) otelSpanOf(sp *otelSpan) (*otelRead, error) {
	o := &otelRead{sp: sp}
	var err error
	if o.tid, o.sid, o.parent, err = s.otelIDs(sp); err != nil {
		return nil, err
	}
	if o.start, err = otelTime(sp.StartTime, sp.StartTimeUnixNano); err != nil {
		return nil, s.errf("startTime", "%v", err)
	}
	if o.start.IsZero() {
		return nil, s.errf("startTime", "missing; a span has a start time")
	}
	if o.end, err = otelTime(sp.EndTime, sp.EndTimeUnixNano); err != nil {
		return nil, s.errf("endTime", "%v", err)
	}
	if o.end.Before(o.start) {
		o.end = o.start // an unended span: no duration rather than a negative one
	}
	if o.attrs, err = otelAttrs(sp.Attributes); err != nil {
		return nil, s.errf("attributes", "%v", err)
	}
	code, err := otelStatus(sp.Status.Code)
	if err != nil {
		return nil, s.errf("status.code", "%v", err)
	}
	o.failed = code == 2
	o.errMsg, o.exception = otelFailure(sp, o.failed)
	o.model = firstNonEmpty(o.attrs.str("gen_ai.response.model"), o.attrs.str("gen_ai.request.model"), o.attrs.str("fragola.agent.model"))
	o.kind = otelKind(sp.Name, o.attrs)
	return o, nil
}

// otelIDs parses the span's trace id, span id (neither may be zero) and
// parent span id (zero for a root), from whichever spelling the span uses.
func (s *source) otelIDs(sp *otelSpan) (tid trace.TraceID, sid, parent trace.SpanID, err error) {
	tid, err = trace.ParseTraceID(sp.TraceID)
	if err != nil || tid.IsZero() {
		if err == nil {
			err = errors.New("is all zeros")
		}
		return tid, sid, parent, s.errf("traceId", "%v", err)
	}
	sid, err = trace.ParseSpanID(sp.SpanID)
	if err != nil || sid.IsZero() {
		if err == nil {
			err = errors.New("missing or all zeros")
		}
		return tid, sid, parent, s.errf("spanId", "%v", err)
	}
	parentHex, parentField := sp.ParentSpanID, "parentSpanId"
	if parentHex == "" {
		parentHex, parentField = sp.ParentID, "parentId"
	}
	if parentHex == "" && sp.ParentSpanContext != nil {
		parentHex, parentField = sp.ParentSpanContext.SpanID, "parentSpanContext.spanId"
	}
	if parent, err = trace.ParseSpanID(parentHex); err != nil {
		return tid, sid, parent, s.errf(parentField, "%v", err)
	}
	return tid, sid, parent, nil
}

// otelFailure returns the message of a failed span (empty when it did not
// fail) and the attributes of its last exception event (whether or not it
// failed). The message is the status message, else the first exception's
// "type: message", else a generic one naming the span.
func otelFailure(sp *otelSpan, failed bool) (string, trace.Value) {
	errMsg := ""
	var exception trace.Value
	for _, e := range sp.Events {
		if e.Name != "exception" {
			continue
		}
		ea, _ := otelAttrs(e.Attributes)
		exception = ea.json()
		if errMsg == "" {
			errMsg = ea.str("exception.message")
			if t := ea.str("exception.type"); t != "" && errMsg != "" && !strings.HasPrefix(errMsg, t) {
				errMsg = t + ": " + errMsg
			}
		}
	}
	if sp.Status.Message != "" {
		errMsg = sp.Status.Message
	}
	if !failed {
		return "", exception
	}
	if errMsg == "" {
		errMsg = "span " + sp.Name + " failed"
	}
	return errMsg, exception
}

// otelKind classifies a span by its name and attributes: "model" (a model
// invocation: "model" or "llm" in the name, or a gen_ai chat operation),
// "tool" ("tool" in the name), "run" (a name ending in "run" or "agent")
// or "node" (anything else).
func otelKind(name string, attrs otelAttrMap) string {
	lname := strings.ToLower(name)
	switch {
	case strings.Contains(lname, "model") || strings.Contains(lname, "llm") || attrs.str("gen_ai.operation.name") == "chat":
		return "model"
	case strings.Contains(lname, "tool"):
		return "tool"
	case strings.HasSuffix(lname, "run") || strings.HasSuffix(lname, "agent"):
		return "run"
	}
	return "node"
}

// otelRun emits a root span as a run: run.start (its attributes as Input,
// tags for the source, service, agent id and model), the span's own call
// or events, and run.end. A model or tool span at the root gets a run
// around it: its call record takes a span id derived from the span's, and
// its events go under the run.
func (s *source) otelRun(o *otelRead) error {
	name := firstNonEmpty(o.attrs.str("fragola.agent.name"), o.sp.Name)
	tags := []string{"source:fragola", "otel.span:" + o.sp.Name}
	for _, k := range [][2]string{{"service", "service.name"}, {"agent.id", "fragola.agent.id"}, {"model", ""}} {
		v := o.model
		if k[1] != "" {
			v = o.attrs.str(k[1])
		}
		if v != "" {
			tags = append(tags, k[0]+":"+v)
		}
	}
	if err := s.emit(trace.Record{TraceID: o.tid, SpanID: o.sid, Time: o.start, Type: trace.TypeRunStart, Name: name,
		Input: o.attrs.json(), Run: &trace.RunInfo{Tags: tags}}); err != nil {
		return err
	}
	callSpan := o.sid
	if o.kind == "model" || o.kind == "tool" {
		callSpan = spanIDOf(o.tid, "call", string(o.sid[:]))
	}
	if err := s.otelCall(o, callSpan, o.sid, o.sid != callSpan); err != nil {
		return err
	}
	status := trace.TerminationSuccess
	if o.failed {
		status = trace.TerminationError
	}
	return s.emit(trace.Record{TraceID: o.tid, SpanID: o.sid, Time: o.end, Type: trace.TypeRunEnd, Name: name,
		Duration: o.d(), Status: string(status), Error: o.errMsg})
}

// otelNode emits a nested span that is not a call: child.spawn/child.end
// for a nested run (with its termination status), node.start/node.end for
// anything else, with the span's events between them.
func (s *source) otelNode(o *otelRead) error {
	startType, endType := trace.TypeNodeStart, trace.TypeNodeEnd
	status := ""
	if o.kind == "run" {
		startType, endType = trace.TypeChildSpawn, trace.TypeChildEnd
		status = string(trace.TerminationSuccess)
		if o.failed {
			status = string(trace.TerminationError)
		}
	}
	if err := s.emit(trace.Record{TraceID: o.tid, SpanID: o.sid, ParentID: o.parent, Time: o.start, Type: startType,
		Name: o.sp.Name, Input: o.attrs.json()}); err != nil {
		return err
	}
	if err := s.otelEvents(o.sp, o.tid, o.sid, false); err != nil {
		return err
	}
	return s.emit(trace.Record{TraceID: o.tid, SpanID: o.sid, ParentID: o.parent, Time: o.end, Type: endType,
		Name: o.sp.Name, Duration: o.d(), Status: status, Error: o.errMsg})
}

// otelCall emits the records of span o as span (under parent): a model
// call or a tool call, with its events, or only the events of a run or
// node span. eventsUnderParent puts a call's events under parent instead
// of under the call (a root call span, whose events belong to its run).
func (s *source) otelCall(o *otelRead, span, parent trace.SpanID, eventsUnderParent bool) error {
	evParent := span
	if eventsUnderParent {
		evParent = parent
	}
	failed := o.errMsg != ""
	d := o.d()
	switch o.kind {
	case "model":
		if err := s.otelEvents(o.sp, o.tid, evParent, failed); err != nil {
			return err
		}
		r := trace.Record{TraceID: o.tid, SpanID: span, ParentID: parent, Time: o.start.Add(d), Type: trace.TypeModelCall,
			Name: firstNonEmpty(o.model, o.sp.Name), Duration: d, Input: o.attrs.json(), Error: o.errMsg,
			Status: o.attrs.str("gen_ai.response.finish_reasons")}
		r.Usage.Provider = firstNonEmpty(o.attrs.str("gen_ai.system"), o.attrs.str("gen_ai.provider.name"))
		r.Usage.InputTokens = max(o.attrs.num("gen_ai.usage.input_tokens"), 0)
		r.Usage.OutputTokens = max(o.attrs.num("gen_ai.usage.output_tokens"), 0)
		if failed {
			r.Output = o.exception
		}
		return s.emit(r)
	case "tool":
		name := firstNonEmpty(o.attrs.str("gen_ai.tool.name"), o.attrs.str("fragola.tool.name"), o.attrs.str("tool.name"), o.sp.Name)
		if err := s.emit(trace.Record{TraceID: o.tid, SpanID: span, ParentID: parent, Time: o.start, Type: trace.TypeToolStart,
			Name: name, Input: o.attrs.json()}); err != nil {
			return err
		}
		if err := s.otelEvents(o.sp, o.tid, evParent, failed); err != nil {
			return err
		}
		r := trace.Record{TraceID: o.tid, SpanID: span, ParentID: parent, Time: o.start.Add(d), Type: trace.TypeToolEnd, Name: name, Duration: d}
		if failed {
			r.Type, r.Error, r.Output = trace.TypeToolError, o.errMsg, o.exception
		}
		return s.emit(r)
	}
	return s.otelEvents(o.sp, o.tid, span, false)
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
