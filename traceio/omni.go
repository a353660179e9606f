package traceio

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// omni's ExecutionTrace as TraceStorage writes it (omni/tracer/storage.py).
type omniTrace struct {
	TraceID      string          `json:"trace_id"`
	RootStepID   string          `json:"root_step_id"`
	StartTime    json.RawMessage `json:"start_time"`
	EndTime      json.RawMessage `json:"end_time"`
	UserQuery    json.RawMessage `json:"user_query"`
	ThreadID     string          `json:"thread_id"`
	Success      *bool           `json:"success"`
	ErrorMessage *string         `json:"error_message"`
}

type omniStep struct {
	StepID           string          `json:"step_id"`
	StepType         string          `json:"step_type"`
	Name             string          `json:"name"`
	ParentID         *string         `json:"parent_id"`
	InputData        json.RawMessage `json:"input_data"`
	OutputData       json.RawMessage `json:"output_data"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Timestamp        json.RawMessage `json:"timestamp"`
	DurationMs       *float64        `json:"duration_ms"`
	Status           string          `json:"status"`
}

type omniMemory struct {
	VarName    string          `json:"var_name"`
	Value      json.RawMessage `json:"value"`
	SourceStep string          `json:"source_step"`
	Timestamp  json.RawMessage `json:"timestamp"`
}

// readOmni reads one omni trace (<trace_id>.json).
//
// The trace id is derived from omni's trace_id and start_time; span ids
// from the step ids. The root step (root_step_id) is the run: run.start
// at start_time with the root's input, run.end at end_time with its
// output, "success"/"error" from success and error_message. Other steps
// become tool.start/tool.end (tool_*, retrieval), model.call (llm_*,
// reasoning, thinking; reasoning_content as Thinking), error, or
// node.start/node.end (node_*, chain_*, anything else), under the step
// their parent_id names. params and global_vars become memory.set records
// of scope param (at the start) and global (at the end); each memory pool
// history entry becomes a memory.set of scope memory whose parent is the
// step that wrote it and whose Iteration is that step's position among the
// steps (from 1, in file order). Step and memory records are ordered by
// time, file order breaking ties, and numbered in that order.
func readOmni(s *source) error {
	o := &omniRun{s: s, root: -1}
	if err := o.readHeader(); err != nil {
		return err
	}
	if err := o.readSteps(); err != nil {
		return err
	}
	o.findRoot()
	o.settleStart()
	o.assignSpans()
	for i := range o.steps {
		if i != o.root {
			o.addStep(i)
		}
	}
	if err := o.addMemoryPool(); err != nil {
		return err
	}
	slices.SortStableFunc(o.evs, func(a, b omniEvent) int { return a.at.Compare(b.at) })
	return o.emitRun()
}

// omniRun is the state of reading one omni trace, in the order readOmni
// fills it: the document's top level, its steps, the root step and start
// time, the ids, then the timeline of records to emit between run.start
// and run.end.
type omniRun struct {
	s    *source
	data []byte            // the whole document, for line numbers
	raw  map[string]member // the document's top-level members by key
	doc  omniTrace

	start, end time.Time // start_time and end_time; start settled by settleStart

	steps []omniStep      // in file order
	times []time.Time     // steps[i]'s timestamp (zero when it has none)
	durs  []time.Duration // steps[i]'s duration_ms
	root  int             // the index of the root step (the run), -1 if none

	tid     trace.TraceID
	run     trace.SpanID            // the run's span: run.start, run.end, the root step
	span    map[string]trace.SpanID // step id → its span
	ordinal map[string]int          // step id → position among the non-root steps, from 1

	evs []omniEvent // the timeline, sorted by time before it is emitted
}

// omniEvent is one record of the timeline and the time it sorts by.
type omniEvent struct {
	at  time.Time
	rec trace.Record
}

// fieldErr reports err about the member m, named field, at m's line.
func (o *omniRun) fieldErr(m member, field string, err error) error {
	return &Error{File: o.s.name, Line: lineAt(o.data, m.off), Field: field, Err: err}
}

// readHeader decodes the document's top level: trace_id (required),
// start_time and end_time.
func (o *omniRun) readHeader() error {
	data, top, err := o.s.object(&o.doc)
	if err != nil {
		return err
	}
	o.data = data
	o.raw = make(map[string]member, len(top))
	for _, m := range top {
		o.raw[m.key] = m
	}
	if o.doc.TraceID == "" {
		return &Error{File: o.s.name, Line: 1, Field: "trace_id", Err: errors.New("missing; an omni trace names itself")}
	}
	if o.start, err = parseTime(o.doc.StartTime); err != nil {
		return o.fieldErr(o.raw["start_time"], "start_time", err)
	}
	if o.end, err = parseTime(o.doc.EndTime); err != nil {
		return o.fieldErr(o.raw["end_time"], "end_time", err)
	}
	return nil
}

// readSteps decodes the steps object, in file order, with each step's time
// and duration. A step without a step_id takes its key.
func (o *omniRun) readSteps() error {
	stepsMember := o.raw["steps"]
	stepMembers, err := members(stepsMember.raw, stepsMember.off)
	if err != nil {
		return o.fieldErr(stepsMember, "steps", err)
	}
	o.steps = make([]omniStep, len(stepMembers))
	o.times = make([]time.Time, len(o.steps))
	o.durs = make([]time.Duration, len(o.steps))
	for i, m := range stepMembers {
		field := "steps." + m.key
		st := &o.steps[i]
		if err := o.s.decodeAt(o.data, m, field, st); err != nil {
			return err
		}
		if st.StepID == "" {
			st.StepID = m.key
		}
		if o.times[i], err = parseTime(st.Timestamp); err != nil {
			return o.fieldErr(m, field+".timestamp", err)
		}
		if o.durs[i], err = optMillis(st.DurationMs); err != nil {
			return o.fieldErr(m, field+".duration_ms", err)
		}
	}
	return nil
}

// findRoot sets root to the step root_step_id names or, without one, the
// first step that has no parent.
func (o *omniRun) findRoot() {
	for i := range o.steps {
		st := &o.steps[i]
		if st.StepID == o.doc.RootStepID || (o.doc.RootStepID == "" && st.ParentID == nil) {
			o.root = i
			return
		}
	}
}

// settleStart makes start the earliest time in the trace: start_time, else
// the root step's time, moved back to any earlier step; the Unix epoch when
// nothing has a time.
func (o *omniRun) settleStart() {
	if o.start.IsZero() && o.root >= 0 {
		o.start = o.times[o.root]
	}
	for _, t := range o.times {
		if o.start.IsZero() || (!t.IsZero() && t.Before(o.start)) {
			o.start = t
		}
	}
	if o.start.IsZero() {
		o.start = time.Unix(0, 0).UTC()
	}
}

// assignSpans derives the trace id and each step's span id and ordinal;
// the root step's span is the run's.
func (o *omniRun) assignSpans() {
	o.tid = traceIDOf(string(FormatOmni), o.doc.TraceID, string(o.doc.StartTime))
	o.run = spanIDOf(o.tid, "run")
	o.span = make(map[string]trace.SpanID, len(o.steps))
	o.ordinal = make(map[string]int, len(o.steps))
	n := 0
	for i := range o.steps {
		id := o.steps[i].StepID
		if i == o.root {
			o.span[id] = o.run
			continue
		}
		n++
		o.span[id] = spanIDOf(o.tid, "step", id)
		o.ordinal[id] = n
	}
}

// parentOf is the span of the step st's parent_id names, else the run's.
func (o *omniRun) parentOf(st *omniStep) trace.SpanID {
	if st.ParentID != nil {
		if p, ok := o.span[*st.ParentID]; ok {
			return p
		}
	}
	return o.run
}

// add puts r on the timeline, in this trace, at start when it has no time.
func (o *omniRun) add(r trace.Record) {
	r.TraceID = o.tid
	if r.Time.IsZero() {
		r.Time = o.start
	}
	o.evs = append(o.evs, omniEvent{at: r.Time, rec: r})
}

// omniKind classifies an omni step_type: "tool", "model", "error" or
// "node" (node_*, chain_*, and kinds this reader does not know).
func omniKind(stepType string) string {
	switch stepType {
	case "tool_start", "tool_end", "retrieval":
		return "tool"
	case "llm_start", "llm_end", "llm_stream", "reasoning", "thinking":
		return "model"
	case "error":
		return "error"
	}
	return "node"
}

// addStep puts the records of the non-root step i on the timeline: a
// model.call, an error, or a start and an end (tool or node).
func (o *omniRun) addStep(i int) {
	st := &o.steps[i]
	sp, parent := o.span[st.StepID], o.parentOf(st)
	t := o.times[i]
	if t.IsZero() {
		t = o.start
	}
	failed := st.Status == "error" || st.Status == "failed"
	msg := ""
	if failed {
		msg = omniError(st)
	}
	startRec := trace.Record{SpanID: sp, ParentID: parent, Time: t, Name: st.Name, Input: jsonValue(st.InputData)}
	endRec := trace.Record{SpanID: sp, ParentID: parent, Time: t.Add(o.durs[i]), Name: st.Name, Duration: o.durs[i],
		Output: jsonValue(st.OutputData), Thinking: jsonValue(st.ReasoningContent), Error: msg}
	switch omniKind(st.StepType) {
	case "tool":
		startRec.Type, endRec.Type = trace.TypeToolStart, trace.TypeToolEnd
		if failed {
			endRec.Type = trace.TypeToolError
		}
	case "model":
		endRec.Type, endRec.Input = trace.TypeModelCall, startRec.Input
		o.add(endRec)
		return
	case "error":
		o.add(trace.Record{SpanID: sp, ParentID: parent, Time: t, Type: trace.TypeError, Name: st.Name,
			Error: firstNonEmpty(msg, omniError(st)), Output: jsonValue(st.OutputData)})
		return
	default:
		startRec.Type, endRec.Type = trace.TypeNodeStart, trace.TypeNodeEnd
	}
	o.add(startRec)
	o.add(endRec)
}

// addMemoryPool puts a memory.set of scope memory on the timeline for each
// history entry of each variable in memory_pool.
func (o *omniRun) addMemoryPool() error {
	poolMember := o.raw["memory_pool"]
	pool, err := members(poolMember.raw, poolMember.off)
	if err != nil {
		return o.fieldErr(poolMember, "memory_pool", err)
	}
	for _, v := range pool {
		if err := o.addMemoryHistory(v); err != nil {
			return err
		}
	}
	return nil
}

// addMemoryHistory adds the history of the memory_pool variable v: each
// entry under the step that wrote it (its source_step, else the run), with
// that step's ordinal as Iteration.
func (o *omniRun) addMemoryHistory(v member) error {
	hist, err := elems(v.raw, v.off)
	if err != nil {
		return o.fieldErr(v, "memory_pool."+v.key, err)
	}
	for j, h := range hist {
		field := fmt.Sprintf("memory_pool.%s[%d]", v.key, j)
		var m omniMemory
		if err := o.s.decodeAt(o.data, h, field, &m); err != nil {
			return err
		}
		t, err := parseTime(m.Timestamp)
		if err != nil {
			return o.fieldErr(h, field+".timestamp", err)
		}
		parent, ok := o.span[m.SourceStep]
		if !ok {
			parent = o.run
		}
		o.add(trace.Record{SpanID: spanIDOf(o.tid, "memory", v.key, fmt.Sprint(j)), ParentID: parent, Time: t,
			Type: trace.TypeMemorySet, Name: firstNonEmpty(m.VarName, v.key), Status: string(trace.ScopeMemory),
			Output: jsonValue(m.Value), Iteration: o.ordinal[m.SourceStep]})
	}
	return nil
}

// emitRun emits the trace in order: run.start, the params, the sorted
// timeline, the globals and run.end. The run ends at end_time, or at the
// last record of the timeline when that is later.
func (o *omniRun) emitRun() error {
	if err := o.s.emit(o.runStart()); err != nil {
		return err
	}
	if err := o.s.omniVars(o.data, o.raw["params"], "params", trace.ScopeParam, o.tid, o.run, o.start); err != nil {
		return err
	}
	last := o.start
	for _, e := range o.evs {
		last = maxTime(last, e.at)
		if err := o.s.emit(e.rec); err != nil {
			return err
		}
	}
	end := o.end
	if end.IsZero() || end.Before(last) {
		end = maxTime(end, last)
	}
	if err := o.s.omniVars(o.data, o.raw["global_vars"], "global_vars", trace.ScopeGlobal, o.tid, o.run, end); err != nil {
		return err
	}
	return o.s.emit(o.runEnd(end))
}

// runStart is the run.start record: named after the root step, with its
// input (else user_query as {"query": …}), tagged with the omni trace id
// and thread.
func (o *omniRun) runStart() trace.Record {
	rs := trace.Record{TraceID: o.tid, SpanID: o.run, Time: o.start, Type: trace.TypeRunStart, Name: "omni",
		Run: &trace.RunInfo{Tags: []string{"source:omni", "omni.trace:" + o.doc.TraceID}}}
	if o.doc.ThreadID != "" {
		rs.Run.Tags = append(rs.Run.Tags, "thread:"+o.doc.ThreadID)
	}
	if o.root >= 0 {
		rs.Name, rs.Input = o.steps[o.root].Name, jsonValue(o.steps[o.root].InputData)
	}
	if rs.Input == nil && textOf(o.doc.UserQuery) != "" {
		q, _ := json.Marshal(map[string]json.RawMessage{"query": o.doc.UserQuery})
		rs.Input = q
	}
	return rs
}

// runEnd is the run.end record at end: the root step's name and output,
// "success" unless success is false or error_message is set.
func (o *omniRun) runEnd(end time.Time) trace.Record {
	re := trace.Record{TraceID: o.tid, SpanID: o.run, Time: end, Type: trace.TypeRunEnd, Name: "omni",
		Duration: end.Sub(o.start), Status: string(trace.TerminationSuccess)}
	if o.root >= 0 {
		re.Name, re.Output = o.steps[o.root].Name, jsonValue(o.steps[o.root].OutputData)
	}
	if o.doc.Success != nil && !*o.doc.Success {
		re.Status, re.Error = string(trace.TerminationError), "omni run failed"
	}
	if o.doc.ErrorMessage != nil && *o.doc.ErrorMessage != "" {
		re.Status, re.Error = string(trace.TerminationError), *o.doc.ErrorMessage
	}
	return re
}

// omniVars emits one memory.set per member of the params or global_vars
// object m.
func (s *source) omniVars(data []byte, m member, field string, scope trace.Scope, tid trace.TraceID, run trace.SpanID, at time.Time) error {
	vars, err := members(m.raw, m.off)
	if err != nil {
		return &Error{File: s.name, Line: lineAt(data, m.off), Field: field, Err: err}
	}
	for _, v := range vars {
		if err := s.emit(trace.Record{TraceID: tid, SpanID: spanIDOf(tid, string(scope), v.key), ParentID: run, Time: at,
			Type: trace.TypeMemorySet, Name: v.key, Status: string(scope), Output: jsonValue(v.raw)}); err != nil {
			return err
		}
	}
	return nil
}

// omniError is the message of a failed step: output_data.error when it is
// there, else a generic one naming the step.
func omniError(st *omniStep) string {
	var out struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(st.OutputData, &out) == nil {
		if msg := textOf(out.Error); msg != "" {
			return msg
		}
	}
	return fmt.Sprintf("step %s (%s) failed", st.Name, st.StepType)
}
