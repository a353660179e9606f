package genkittrace

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// maxSliceDepth bounds the nesting of SLICE attribute values that toPdata
// copies; deeper values are kept as their text (otlp.Map bounds nesting
// again, to its own limit).
const maxSliceDepth = 32

// toPdata copies one ended span into a new ptrace.Traces: its resource,
// its instrumentation scope and the span itself (ids, parent, kind, times,
// attributes, events, links, status and the dropped counts), the same
// fields the OTLP exporters send. If root, the span's parent is left out,
// so that the mapping makes the span a run.
func toPdata(s sdktrace.ReadOnlySpan, root bool) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if res := s.Resource(); res != nil {
		rs.SetSchemaUrl(res.SchemaURL())
		putAttrs(rs.Resource().Attributes(), res.Attributes())
	}
	ss := rs.ScopeSpans().AppendEmpty()
	sc := s.InstrumentationScope()
	ss.Scope().SetName(sc.Name)
	ss.Scope().SetVersion(sc.Version)
	ss.SetSchemaUrl(sc.SchemaURL)
	putAttrs(ss.Scope().Attributes(), sc.Attributes.ToSlice())

	sp := ss.Spans().AppendEmpty()
	sctx := s.SpanContext()
	sp.SetTraceID(pcommon.TraceID(sctx.TraceID()))
	sp.SetSpanID(pcommon.SpanID(sctx.SpanID()))
	sp.TraceState().FromRaw(sctx.TraceState().String())
	sp.SetFlags(uint32(sctx.TraceFlags()))
	if p := s.Parent(); !root && p.SpanID().IsValid() {
		sp.SetParentSpanID(pcommon.SpanID(p.SpanID()))
	}
	sp.SetName(s.Name())
	sp.SetKind(spanKind(s.SpanKind()))
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime()))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime()))
	putAttrs(sp.Attributes(), s.Attributes())
	sp.SetDroppedAttributesCount(clampCount(s.DroppedAttributes()))
	sp.SetDroppedEventsCount(clampCount(s.DroppedEvents()))
	sp.SetDroppedLinksCount(clampCount(s.DroppedLinks()))

	evs := s.Events()
	pevs := sp.Events()
	pevs.EnsureCapacity(len(evs))
	for _, e := range evs {
		pe := pevs.AppendEmpty()
		pe.SetName(e.Name)
		pe.SetTimestamp(pcommon.NewTimestampFromTime(e.Time))
		putAttrs(pe.Attributes(), e.Attributes)
		pe.SetDroppedAttributesCount(clampCount(e.DroppedAttributeCount))
	}
	links := s.Links()
	plinks := sp.Links()
	plinks.EnsureCapacity(len(links))
	for _, l := range links {
		pl := plinks.AppendEmpty()
		pl.SetTraceID(pcommon.TraceID(l.SpanContext.TraceID()))
		pl.SetSpanID(pcommon.SpanID(l.SpanContext.SpanID()))
		pl.TraceState().FromRaw(l.SpanContext.TraceState().String())
		pl.SetFlags(uint32(l.SpanContext.TraceFlags()))
		putAttrs(pl.Attributes(), l.Attributes)
		pl.SetDroppedAttributesCount(clampCount(l.DroppedAttributeCount))
	}

	st := s.Status()
	switch st.Code {
	case codes.Error:
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(st.Description)
	case codes.Ok:
		sp.Status().SetCode(ptrace.StatusCodeOk)
	}
	return td
}

// spanKind maps the SDK's span kind to OTLP's; both number internal,
// server, client, producer and consumer from 1.
func spanKind(k oteltrace.SpanKind) ptrace.SpanKind {
	switch k {
	case oteltrace.SpanKindInternal:
		return ptrace.SpanKindInternal
	case oteltrace.SpanKindServer:
		return ptrace.SpanKindServer
	case oteltrace.SpanKindClient:
		return ptrace.SpanKindClient
	case oteltrace.SpanKindProducer:
		return ptrace.SpanKindProducer
	case oteltrace.SpanKindConsumer:
		return ptrace.SpanKindConsumer
	}
	return ptrace.SpanKindUnspecified
}

func clampCount(n int) uint32 {
	return uint32(min(max(n, 0), 1<<32-1))
}

// putAttrs copies attributes into m. A key given twice keeps its last
// value, as the SDK does.
func putAttrs(m pcommon.Map, kvs []attribute.KeyValue) {
	m.EnsureCapacity(len(kvs))
	for _, kv := range kvs {
		putValue(m.PutEmpty(string(kv.Key)), kv.Value, 0)
	}
}

// putValue sets dst to v. It handles every attribute type, and any type a
// later SDK adds, as text.
func putValue(dst pcommon.Value, v attribute.Value, depth int) {
	switch v.Type() {
	case attribute.EMPTY:
		// an empty value stays empty
	case attribute.BOOL:
		dst.SetBool(v.AsBool())
	case attribute.INT64:
		dst.SetInt(v.AsInt64())
	case attribute.FLOAT64:
		dst.SetDouble(v.AsFloat64())
	case attribute.STRING:
		dst.SetStr(v.AsString())
	case attribute.BOOLSLICE:
		s := dst.SetEmptySlice()
		for _, b := range v.AsBoolSlice() {
			s.AppendEmpty().SetBool(b)
		}
	case attribute.INT64SLICE:
		s := dst.SetEmptySlice()
		for _, n := range v.AsInt64Slice() {
			s.AppendEmpty().SetInt(n)
		}
	case attribute.FLOAT64SLICE:
		s := dst.SetEmptySlice()
		for _, f := range v.AsFloat64Slice() {
			s.AppendEmpty().SetDouble(f)
		}
	case attribute.STRINGSLICE:
		s := dst.SetEmptySlice()
		for _, t := range v.AsStringSlice() {
			s.AppendEmpty().SetStr(t)
		}
	case attribute.BYTESLICE:
		dst.SetEmptyBytes().FromRaw(v.AsByteSlice())
	case attribute.SLICE:
		if depth >= maxSliceDepth {
			dst.SetStr("<loupe: nested deeper than " + strconv.Itoa(maxSliceDepth) + ">")
			return
		}
		s := dst.SetEmptySlice()
		for _, e := range v.AsSlice() {
			putValue(s.AppendEmpty(), e, depth+1)
		}
	default:
		dst.SetStr(v.String())
	}
}
