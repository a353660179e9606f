package otlp

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loupe-dev/loupe/trace"
)

// Traces returns the spans kept in recs' companion records (custom records
// named SpanRecordName, which Map writes), grouped back under their
// resources and scopes: the spans Map was given, as they were (values
// beyond Options' limits excepted). Records of other kinds are ignored;
// spans are in the order of their companion records. A companion record
// that does not decode is reported with its seq, and the rest are
// returned.
func Traces(recs []trace.Record) (ptrace.Traces, error) {
	out := ptrace.NewTraces()
	var firstErr error
	for i := range recs {
		r := &recs[i]
		if r.Type != trace.TypeCustom || r.Name != SpanRecordName {
			continue
		}
		one, err := DecodeJSON(r.Output)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("record seq %d of trace %s: %w", r.Seq, r.TraceID, err)
			}
			continue
		}
		merge(out, one)
	}
	return out, firstErr
}

// merge moves the spans of src into dst, reusing dst's resource and scope
// groups when they are equal.
func merge(dst, src ptrace.Traces) {
	srss := src.ResourceSpans()
	for i := 0; i < srss.Len(); i++ {
		srs := srss.At(i)
		drs, found := ptrace.ResourceSpans{}, false
		for j := 0; j < dst.ResourceSpans().Len(); j++ {
			c := dst.ResourceSpans().At(j)
			if c.SchemaUrl() == srs.SchemaUrl() && c.Resource().Attributes().Equal(srs.Resource().Attributes()) &&
				c.Resource().DroppedAttributesCount() == srs.Resource().DroppedAttributesCount() {
				drs, found = c, true
				break
			}
		}
		if !found {
			drs = dst.ResourceSpans().AppendEmpty()
			srs.Resource().CopyTo(drs.Resource())
			drs.SetSchemaUrl(srs.SchemaUrl())
		}
		for k := 0; k < srs.ScopeSpans().Len(); k++ {
			sss := srs.ScopeSpans().At(k)
			dss, found := ptrace.ScopeSpans{}, false
			for j := 0; j < drs.ScopeSpans().Len(); j++ {
				c := drs.ScopeSpans().At(j)
				if c.SchemaUrl() == sss.SchemaUrl() && c.Scope().Name() == sss.Scope().Name() &&
					c.Scope().Version() == sss.Scope().Version() && c.Scope().Attributes().Equal(sss.Scope().Attributes()) {
					dss, found = c, true
					break
				}
			}
			if !found {
				dss = drs.ScopeSpans().AppendEmpty()
				sss.Scope().CopyTo(dss.Scope())
				dss.SetSchemaUrl(sss.SchemaUrl())
			}
			sss.Spans().MoveAndAppendTo(dss.Spans())
		}
	}
}
