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
	var doc omniTrace
	data, top, err := s.object(&doc)
	if err != nil {
		return err
	}
	raw := map[string]member{}
	for _, m := range top {
		raw[m.key] = m
	}
	if doc.TraceID == "" {
		return &Error{File: s.name, Line: 1, Field: "trace_id", Err: errors.New("missing; an omni trace names itself")}
	}
	fieldErr := func(m member, field string, err error) error {
		return &Error{File: s.name, Line: lineAt(data, m.off), Field: field, Err: err}
	}
	start, err := parseTime(doc.StartTime)
	if err != nil {
		return fieldErr(raw["start_time"], "start_time", err)
	}
	end, err := parseTime(doc.EndTime)
	if err != nil {
		return fieldErr(raw["end_time"], "end_time", err)
	}

	// Steps, in file order.
	stepMembers, err := members(raw["steps"].raw, raw["steps"].off)
	if err != nil {
		return fieldErr(raw["steps"], "steps", err)
	}
	steps := make([]omniStep, len(stepMembers))
	times := make([]time.Time, len(steps))
	durs := make([]time.Duration, len(steps))
	for i, m := range stepMembers {
		field := "steps." + m.key
		if err := s.decodeAt(data, m, field, &steps[i]); err != nil {
			return err
		}
		if steps[i].StepID == "" {
			steps[i].StepID = m.key
		}
		if times[i], err = parseTime(steps[i].Timestamp); err != nil {
			return fieldErr(m, field+".timestamp", err)
		}
		if durs[i], err = optMillis(steps[i].DurationMs); err != nil {
			return fieldErr(m, field+".duration_ms", err)
		}
	}
	root := -1
	for i := range steps {
		if steps[i].StepID == doc.RootStepID || (doc.RootStepID == "" && steps[i].ParentID == nil && root < 0) {
			root = i
			break
		}
	}
	if start.IsZero() && root >= 0 {
		start = times[root]
	}
	for _, t := range times {
		if start.IsZero() || (!t.IsZero() && t.Before(start)) {
			start = t
		}
	}
	if start.IsZero() {
		start = time.Unix(0, 0).UTC()
	}

	tid := traceIDOf(string(FormatOmni), doc.TraceID, string(doc.StartTime))
	run := spanIDOf(tid, "run")
	span := map[string]trace.SpanID{}
	ordinal := map[string]int{}
	n := 0
	for i := range steps {
		if i == root {
			span[steps[i].StepID] = run
			continue
		}
		n++
		span[steps[i].StepID] = spanIDOf(tid, "step", steps[i].StepID)
		ordinal[steps[i].StepID] = n
	}
	parentOf := func(st *omniStep) trace.SpanID {
		if st.ParentID != nil {
			if p, ok := span[*st.ParentID]; ok {
				return p
			}
		}
		return run
	}

	// The timeline: step starts and ends and memory writes, by time.
	type event struct {
		at  time.Time
		rec trace.Record
	}
	var evs []event
	add := func(r trace.Record) {
		r.TraceID = tid
		if r.Time.IsZero() {
			r.Time = start
		}
		evs = append(evs, event{at: r.Time, rec: r})
	}
	for i := range steps {
		if i == root {
			continue
		}
		st := &steps[i]
		sp, parent := span[st.StepID], parentOf(st)
		t := times[i]
		if t.IsZero() {
			t = start
		}
		failed := st.Status == "error" || st.Status == "failed"
		msg := ""
		if failed {
			msg = omniError(st)
		}
		startRec := trace.Record{SpanID: sp, ParentID: parent, Time: t, Name: st.Name, Input: jsonValue(st.InputData)}
		endRec := trace.Record{SpanID: sp, ParentID: parent, Time: t.Add(durs[i]), Name: st.Name, Duration: durs[i],
			Output: jsonValue(st.OutputData), Thinking: jsonValue(st.ReasoningContent), Error: msg}
		switch st.StepType {
		case "tool_start", "tool_end", "retrieval":
			startRec.Type, endRec.Type = trace.TypeToolStart, trace.TypeToolEnd
			if failed {
				endRec.Type = trace.TypeToolError
			}
		case "llm_start", "llm_end", "llm_stream", "reasoning", "thinking":
			endRec.Type, endRec.Input = trace.TypeModelCall, startRec.Input
			add(endRec)
			continue
		case "error":
			add(trace.Record{SpanID: sp, ParentID: parent, Time: t, Type: trace.TypeError, Name: st.Name,
				Error: firstNonEmpty(msg, omniError(st)), Output: jsonValue(st.OutputData)})
			continue
		default: // node_*, chain_*, and kinds this reader does not know
			startRec.Type, endRec.Type = trace.TypeNodeStart, trace.TypeNodeEnd
		}
		add(startRec)
		add(endRec)
	}
	pool, err := members(raw["memory_pool"].raw, raw["memory_pool"].off)
	if err != nil {
		return fieldErr(raw["memory_pool"], "memory_pool", err)
	}
	for _, v := range pool {
		hist, err := elems(v.raw, v.off)
		if err != nil {
			return fieldErr(v, "memory_pool."+v.key, err)
		}
		for j, h := range hist {
			field := fmt.Sprintf("memory_pool.%s[%d]", v.key, j)
			var m omniMemory
			if err := s.decodeAt(data, h, field, &m); err != nil {
				return err
			}
			t, err := parseTime(m.Timestamp)
			if err != nil {
				return fieldErr(h, field+".timestamp", err)
			}
			parent, ok := span[m.SourceStep]
			if !ok {
				parent = run
			}
			add(trace.Record{SpanID: spanIDOf(tid, "memory", v.key, fmt.Sprint(j)), ParentID: parent, Time: t,
				Type: trace.TypeMemorySet, Name: firstNonEmpty(m.VarName, v.key), Status: string(trace.ScopeMemory),
				Output: jsonValue(m.Value), Iteration: ordinal[m.SourceStep]})
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at.Compare(b.at) })

	// Emit: run.start, params, the timeline, globals, run.end.
	rs := trace.Record{TraceID: tid, SpanID: run, Time: start, Type: trace.TypeRunStart, Name: "omni",
		Tags: []string{"source:omni", "omni.trace:" + doc.TraceID}}
	if doc.ThreadID != "" {
		rs.Tags = append(rs.Tags, "thread:"+doc.ThreadID)
	}
	re := trace.Record{TraceID: tid, SpanID: run, Type: trace.TypeRunEnd, Name: "omni", Status: string(trace.TerminationSuccess)}
	if root >= 0 {
		rs.Name, re.Name = steps[root].Name, steps[root].Name
		rs.Input, re.Output = jsonValue(steps[root].InputData), jsonValue(steps[root].OutputData)
	}
	if rs.Input == nil && textOf(doc.UserQuery) != "" {
		q, _ := json.Marshal(map[string]json.RawMessage{"query": doc.UserQuery})
		rs.Input = q
	}
	if err := s.emit(rs); err != nil {
		return err
	}
	for _, scope := range []struct {
		key   string
		scope trace.Scope
	}{{"params", trace.ScopeParam}} {
		if err := s.omniVars(data, raw[scope.key], scope.key, scope.scope, tid, run, start); err != nil {
			return err
		}
	}
	last := start
	for _, e := range evs {
		last = maxTime(last, e.at)
		if err := s.emit(e.rec); err != nil {
			return err
		}
	}
	if end.IsZero() || end.Before(last) {
		end = maxTime(end, last)
	}
	if err := s.omniVars(data, raw["global_vars"], "global_vars", trace.ScopeGlobal, tid, run, end); err != nil {
		return err
	}
	re.Time, re.Duration = end, end.Sub(start)
	if doc.Success != nil && !*doc.Success {
		re.Status = string(trace.TerminationError)
		re.Error = "omni run failed"
	}
	if doc.ErrorMessage != nil && *doc.ErrorMessage != "" {
		re.Status, re.Error = string(trace.TerminationError), *doc.ErrorMessage
	}
	return s.emit(re)
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
