package trace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// TestEndRecord: a span's end record taken when the call ends and recorded
// later keeps the time and duration of the end, and gets its Seq when
// recorded, so ends can be recorded in an order of the caller's choosing.
func TestEndRecord(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tick := func() time.Time { now = now.Add(time.Second); return now }
	_, ec := trace.New(trace.Options{Now: tick}).Start(context.Background(), "r", trace.RunOptions{})
	// Each clock reading is a second later than the one before.
	a := ec.StartSpan(trace.SpanTool, "a", nil)
	b := ec.StartSpan(trace.SpanTool, "b", nil)
	endB := b.EndRecord(trace.Text("B"), nil) // b ends first, after 1s…
	endA := a.EndRecord(nil, errors.New("a failed"))
	ec.Record(endA) // …but a (3s) is recorded first
	ec.Record(endB)
	h := ec.StartSpan(trace.SpanHook, "h", nil)
	endH := h.EndRecord(nil, nil)
	if !(trace.Span{}).EndRecord(nil, nil).Time.IsZero() || !ec.StartSpan(trace.SpanModel, "m", nil).EndRecord(nil, nil).Time.IsZero() {
		t.Error("the zero span and a model call must give the zero record")
	}
	ec.End(nil, nil)
	recs := ec.Records()
	got := map[string]trace.Record{}
	for _, r := range recs {
		if r.Type == trace.TypeToolEnd || r.Type == trace.TypeToolError {
			got[r.Name] = r
		}
	}
	ra, rb := got["a"], got["b"]
	if ra.Type != trace.TypeToolError || ra.Error != "a failed" || ra.Duration != 3*time.Second || ra.SpanID != a.ID() {
		t.Errorf("a's end = %+v", ra)
	}
	if rb.Type != trace.TypeToolEnd || rb.Output.Text() != "B" || rb.Duration != time.Second || rb.SpanID != b.ID() {
		t.Errorf("b's end = %+v", rb)
	}
	if !(ra.Seq < rb.Seq && ra.Time.After(rb.Time)) {
		t.Errorf("a: seq %d at %v, b: seq %d at %v; want a recorded first, b ended first", ra.Seq, ra.Time, rb.Seq, rb.Time)
	}
	if endH.Type != trace.TypeHookEnd || endH.Name != "h" {
		t.Errorf("hook end = %+v", endH)
	}
}
