package otlp

import (
	"cmp"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// SpanOptions control Spans.
type SpanOptions struct {
	// Content includes inputs, outputs and messages (gen_ai.input.messages,
	// gen_ai.output.messages, gen_ai.tool.call.arguments / .result); by
	// default only names, times, tokens, statuses and errors are exported.
	Content bool
	// Resource attributes for the exported spans, e.g. service.name.
	Resource map[string]string
	// Open ends spans that have no end record at the time of their last
	// record (otherwise they are left out, to be exported when they end).
	Open bool
}

// ScopeName is the instrumentation scope of spans made by Spans.
const ScopeName = "github.com/loupe-dev/loupe"

// Spans turns Loupe records into OpenTelemetry spans following the GenAI
// conventions: a run or child run is an invoke_agent span, a model call a
// chat span (model, provider, tokens, finish reason), a tool call an
// execute_tool span, iterations, pipeline nodes and hooks spans of their
// own, and point records (messages, memory writes, guardrails, errors,
// custom records) events on their parent span. Spans that came from OTLP
// (those with an otel.span companion record) are given back exactly as
// they were received. Ids are the records' own, which are W3C ids.
//
// It also returns the span ids it exported, and the span ids of spans
// still open (no end record; see SpanOptions.Open).
func Spans(recs []trace.Record, o SpanOptions) (td ptrace.Traces, done, open []trace.SpanID) {
	td = ptrace.NewTraces()
	// Spans received over OTLP come back from their companion records.
	fromOTLP := map[trace.SpanID]bool{}
	for i := range recs {
		r := &recs[i]
		if r.Type == trace.TypeCustom && r.Name == SpanRecordName {
			one, err := DecodeJSON(r.Output)
			if err != nil || one.SpanCount() != 1 {
				continue
			}
			sid := trace.SpanID(one.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SpanID())
			fromOTLP[sid] = true
			fromOTLP[r.SpanID] = true
			fromOTLP[derived(r.TraceID, sid, "call", 0)] = true // a root call's own span
			merge(td, one)
		}
	}
	// The spans given back, by id: records made from OTLP log records
	// written in them (messages, logs) become their events.
	given := map[trace.SpanID]ptrace.Span{}
	for _, grs := range td.ResourceSpans().All() {
		for _, gss := range grs.ScopeSpans().All() {
			for _, sp := range gss.Spans().All() {
				given[trace.SpanID(sp.SpanID())] = sp
			}
		}
	}
	rs := td.ResourceSpans().AppendEmpty()
	for k, v := range o.Resource {
		rs.Resource().Attributes().PutStr(k, v)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(ScopeName)

	type group struct {
		recs []*trace.Record
	}
	groups := map[trace.SpanID]*group{}
	var order []trace.SpanID
	sorted := make([]*trace.Record, 0, len(recs))
	for i := range recs {
		sorted = append(sorted, &recs[i])
	}
	slices.SortStableFunc(sorted, func(a, b *trace.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, r := range sorted {
		if fromOTLP[r.SpanID] || fromOTLP[r.ParentID] && r.Type == trace.TypeCustom {
			continue // part of a span given back whole (its events are in it)
		}
		g := groups[r.SpanID]
		if g == nil {
			g = &group{}
			groups[r.SpanID] = g
			order = append(order, r.SpanID)
		}
		g.recs = append(g.recs, r)
	}
	spans := map[trace.SpanID]ptrace.Span{}
	for _, id := range order {
		g := groups[id]
		first := g.recs[0]
		if point(first.Type) {
			continue // an event on its parent, below
		}
		var end *trace.Record
		for _, r := range g.recs[1:] {
			if closesSpan(first.Type, r.Type) {
				end = r
			}
		}
		single := first.Type == trace.TypeModelCall || first.Type == trace.TypeToolEnd || first.Type == trace.TypeToolError
		if end == nil && !single {
			if !o.Open {
				open = append(open, id)
				continue
			}
			end = g.recs[len(g.recs)-1]
		}
		if single {
			end = first
		}
		sp := ss.Spans().AppendEmpty()
		fillSpan(sp, first, end, o)
		spans[id] = sp
		done = append(done, id)
	}
	// Point records become events of their parent span.
	for _, id := range order {
		g := groups[id]
		for _, r := range g.recs {
			if !point(r.Type) {
				continue
			}
			parent, ok := spans[r.ParentID]
			if !ok {
				parent, ok = given[r.ParentID]
			}
			if !ok {
				// Its span was exported before (or never will be): a
				// zero-length span of its own keeps it.
				parent = ss.Spans().AppendEmpty()
				parent.SetTraceID(pcommon.TraceID(r.TraceID))
				parent.SetSpanID(pcommon.SpanID(r.SpanID))
				parent.SetParentSpanID(pcommon.SpanID(r.ParentID))
				parent.SetName(strings.TrimSpace(string(r.Type) + " " + r.Name))
				parent.SetStartTimestamp(pcommon.NewTimestampFromTime(r.Time))
				parent.SetEndTimestamp(pcommon.NewTimestampFromTime(r.Time))
				parent.Attributes().PutStr("loupe.type", string(r.Type))
			}
			ev := parent.Events().AppendEmpty()
			ev.SetName(string(r.Type))
			ev.SetTimestamp(pcommon.NewTimestampFromTime(r.Time))
			a := ev.Attributes()
			if r.Name != "" {
				a.PutStr("loupe.name", r.Name)
			}
			if r.Status != "" {
				a.PutStr("loupe.status", r.Status)
			}
			if r.Error != "" {
				a.PutStr("exception.message", r.Error)
			}
			if o.Content && len(r.Output) > 0 {
				a.PutStr("loupe.output", string(r.Output))
			}
			done = append(done, id)
		}
	}
	if ss.Spans().Len() == 0 {
		td.ResourceSpans().RemoveIf(func(x ptrace.ResourceSpans) bool {
			return x.ScopeSpans().Len() == 1 && x.ScopeSpans().At(0).Spans().Len() == 0
		})
	}
	return td, done, open
}

// SplitOpen splits recs into the records of complete spans, which Spans
// can export now, and those that must wait: the records of spans that have
// not ended, and point records inside them. Order is kept.
func SplitOpen(recs []trace.Record) (complete, waiting []trace.Record) {
	started := map[trace.SpanID]trace.Type{}
	ended := map[trace.SpanID]bool{}
	for i := range recs {
		r := &recs[i]
		if t, ok := started[r.SpanID]; ok {
			if closesSpan(t, r.Type) {
				ended[r.SpanID] = true
			}
			continue
		}
		switch r.Type {
		case trace.TypeRunStart, trace.TypeIterationStart, trace.TypeToolStart, trace.TypeHookStart, trace.TypeChildSpawn, trace.TypeNodeStart:
			started[r.SpanID] = r.Type
		}
	}
	isOpen := func(id trace.SpanID) bool { _, s := started[id]; return s && !ended[id] }
	for _, r := range recs {
		if isOpen(r.SpanID) || point(r.Type) && isOpen(r.ParentID) {
			waiting = append(waiting, r)
		} else {
			complete = append(complete, r)
		}
	}
	return complete, waiting
}

// point reports whether records of type t are events rather than spans.
func point(t trace.Type) bool {
	switch t {
	case trace.TypeMessage, trace.TypeMemorySet, trace.TypeGuardrail, trace.TypeError, trace.TypeCustom, trace.TypeLog,
		trace.TypeStateInit, trace.TypeStateUpdate, trace.TypeModelDelta, trace.TypeToolDiscovered:
		return true
	}
	return false
}

func closesSpan(start, end trace.Type) bool {
	switch start {
	case trace.TypeRunStart:
		return end == trace.TypeRunEnd
	case trace.TypeIterationStart:
		return end == trace.TypeIterationEnd
	case trace.TypeToolStart:
		return end == trace.TypeToolEnd || end == trace.TypeToolError
	case trace.TypeHookStart:
		return end == trace.TypeHookEnd || end == trace.TypeHookError
	case trace.TypeChildSpawn:
		return end == trace.TypeChildEnd
	case trace.TypeNodeStart:
		return end == trace.TypeNodeEnd
	}
	return false
}

// fillSpan writes one span from its first and last records.
func fillSpan(sp ptrace.Span, first, end *trace.Record, o SpanOptions) {
	sp.SetTraceID(pcommon.TraceID(first.TraceID))
	sp.SetSpanID(pcommon.SpanID(first.SpanID))
	sp.SetParentSpanID(pcommon.SpanID(first.ParentID))
	start := first.Time
	if first == end {
		start = end.Start()
	}
	stop := end.Time
	if end.Duration > 0 && first != end {
		start = end.Start()
	}
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(stop))
	a := sp.Attributes()
	name := first.Name
	if name == "" {
		name = end.Name
	}
	a.PutStr("loupe.type", string(first.Type))
	putSession(a, first)
	switch first.Type {
	case trace.TypeRunStart, trace.TypeChildSpawn:
		sp.SetName("invoke_agent " + name)
		a.PutStr("gen_ai.operation.name", "invoke_agent")
		a.PutStr("gen_ai.agent.name", name)
		if tags := first.Tags(); len(tags) > 0 {
			s := a.PutEmptySlice("loupe.tags")
			for _, t := range tags {
				s.AppendEmpty().SetStr(t)
			}
		}
		if end.Status != "" {
			a.PutStr("loupe.termination", end.Status)
		}
		if o.Content {
			putContent(a, "gen_ai.input.messages", first.Input)
			putContent(a, "gen_ai.output.messages", end.Output)
		}
		if end.Error != "" || end.Status != "" && end.Status != string(trace.TerminationSuccess) && end != first {
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage(firstOf(end.Error, end.Status))
		}
		return
	case trace.TypeModelCall:
		sp.SetName("chat " + name)
		sp.SetKind(ptrace.SpanKindClient)
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", name)
		u := first.Usage
		if u.Provider != "" {
			a.PutStr("gen_ai.provider.name", u.Provider)
		}
		putInt(a, "gen_ai.usage.input_tokens", u.InputTokens)
		putInt(a, "gen_ai.usage.output_tokens", u.OutputTokens)
		putInt(a, "gen_ai.usage.cache_read.input_tokens", u.CachedTokens)
		putInt(a, "gen_ai.usage.reasoning.output_tokens", u.ReasoningTokens)
		if u.CostUSD != 0 {
			a.PutDouble("gen_ai.usage.cost", u.CostUSD)
		}
		if u.CostUnknown {
			a.PutBool(AttrCostUnknown, true)
		}
		if first.Status != "" {
			s := a.PutEmptySlice("gen_ai.response.finish_reasons")
			for _, f := range strings.Split(first.Status, ",") {
				s.AppendEmpty().SetStr(f)
			}
		}
		if o.Content {
			putContent(a, "gen_ai.input.messages", first.Input)
			putContent(a, "gen_ai.output.messages", first.Output)
		}
	case trace.TypeToolStart, trace.TypeToolEnd, trace.TypeToolError:
		sp.SetName("execute_tool " + name)
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", name)
		if o.Content {
			putContent(a, "gen_ai.tool.call.arguments", firstValue(first.Input, end.Input))
			putContent(a, "gen_ai.tool.call.result", end.Output)
		}
	default:
		sp.SetName(strings.TrimSpace(strings.TrimSuffix(string(first.Type), ".start") + " " + name))
		if o.Content {
			putContent(a, "input.value", first.Input)
			putContent(a, "output.value", end.Output)
		}
	}
	if end.Error != "" {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(end.Error)
	}
}

func putInt(a pcommon.Map, k string, v int64) {
	if v != 0 {
		a.PutInt(k, v)
	}
}

// putContent stores a Value as the string attribute the conventions use:
// JSON text, or the text itself for a JSON string.
func putContent(a pcommon.Map, k string, v trace.Value) {
	if len(v) == 0 {
		return
	}
	if v[0] == '"' && !strings.HasPrefix(k, "gen_ai.") {
		a.PutStr(k, v.Text())
		return
	}
	a.PutStr(k, string(v))
}

func firstValue(vs ...trace.Value) trace.Value {
	for _, v := range vs {
		if len(v) > 0 {
			return v
		}
	}
	return nil
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
