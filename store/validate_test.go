package store

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// validRecord is a record ValidateRecord accepts.
func validRecord() trace.Record {
	return trace.Record{V: trace.Version, TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Seq: 3,
		Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Type: trace.TypeModelCall, Name: "gpt-4o"}
}

func TestValidateRecordRanges(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*trace.Record)
		want string // "" for valid
	}{
		{"at every bound", func(r *trace.Record) {
			r.Usage = trace.Usage{InputTokens: MaxTokens, OutputTokens: MaxTokens, CachedTokens: MaxTokens, ReasoningTokens: MaxTokens, CostUSD: MaxCostUSD}
			r.Duration, r.Iteration, r.Depth = MaxRecordDuration, MaxIteration, MaxDepth
		}, ""},
		{"zeros", func(r *trace.Record) { r.V = 0 }, ""},
		{"unknown cost", func(r *trace.Record) { r.Usage.CostUnknown = true }, ""},
		{"input tokens 2^63-1", func(r *trace.Record) { r.Usage.InputTokens = math.MaxInt64 },
			"usage.input_tokens 9223372036854775807 is out of range (0 to 1099511627776)"},
		{"input tokens over", func(r *trace.Record) { r.Usage.InputTokens = MaxTokens + 1 }, "usage.input_tokens 1099511627777 is out of range"},
		{"negative output tokens", func(r *trace.Record) { r.Usage.OutputTokens = -1 }, "usage.output_tokens -1 is out of range (0 to 1099511627776)"},
		{"cached tokens", func(r *trace.Record) { r.Usage.CachedTokens = math.MinInt64 }, "usage.cached_tokens -9223372036854775808 is out of range"},
		{"reasoning tokens", func(r *trace.Record) { r.Usage.ReasoningTokens = 1 << 50 }, "usage.reasoning_tokens 1125899906842624 is out of range"},
		{"cost NaN", func(r *trace.Record) { r.Usage.CostUSD = math.NaN() }, "usage.cost_usd NaN is out of range (0 to 1e+09)"},
		{"cost +Inf", func(r *trace.Record) { r.Usage.CostUSD = math.Inf(1) }, "usage.cost_usd +Inf is out of range"},
		{"cost -Inf", func(r *trace.Record) { r.Usage.CostUSD = math.Inf(-1) }, "usage.cost_usd -Inf is out of range"},
		{"negative cost", func(r *trace.Record) { r.Usage.CostUSD = -0.01 }, "usage.cost_usd -0.01 is out of range"},
		{"cost over", func(r *trace.Record) { r.Usage.CostUSD = 2e9 }, "usage.cost_usd 2e+09 is out of range"},
		{"unknown cost with a cost", func(r *trace.Record) { r.Usage.CostUSD, r.Usage.CostUnknown = 1, true }, "usage.cost_unknown is true but cost_usd is 1"},
		{"negative duration", func(r *trace.Record) { r.Duration = -1 }, "duration_ns -1 is out of range (0 to 315360000000000000)"},
		{"duration of 11 years", func(r *trace.Record) { r.Duration = MaxRecordDuration + 365*24*time.Hour }, "duration_ns 346896000000000000 is out of range"},
		{"start before 1678", func(r *trace.Record) {
			r.Time, r.Duration = time.Date(1678, 1, 1, 0, 0, 1, 0, time.UTC), 2*time.Second
		}, "duration_ns 2000000000 puts the start (time minus duration) before the year 1678"},
		{"negative iteration", func(r *trace.Record) { r.Iteration = -1 }, "iteration -1 is out of range (0 to 2147483647)"},
		{"iteration over", func(r *trace.Record) { r.Iteration = math.MaxInt32 + 1 }, "iteration 2147483648 is out of range"},
		{"negative depth", func(r *trace.Record) { r.Depth = -3 }, "depth -3 is out of range (0 to 65536)"},
		{"depth over", func(r *trace.Record) { r.Depth = MaxDepth + 1 }, "depth 65537 is out of range"},
		{"negative version", func(r *trace.Record) { r.V = -1 }, "v -1 is out of range (0 to 1; 0 means 1)"},
		{"version 2", func(r *trace.Record) { r.V = 2 }, "v 2 is out of range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := validRecord()
			tt.mod(&r)
			err := ValidateRecord(7, &r)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateRecord = %v, want nil", err)
				}
				return
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Index != 7 || !strings.HasPrefix(re.Err.Error(), tt.want) || !strings.HasPrefix(tt.want, re.Field+" ") {
				t.Fatalf("ValidateRecord = %#v; want a RecordError for record 7 whose reason begins %q, with its field", err, tt.want)
			}
		})
	}
}

// fields are the JSON names ValidateRecord's messages begin with.
var fields = []string{"trace_id", "span_id", "seq", "time", "v", "iteration", "depth", "duration_ns",
	"usage.input_tokens", "usage.output_tokens", "usage.cached_tokens", "usage.reasoning_tokens", "usage.cost_usd", "usage.cost_unknown"}

// FuzzValidateRecord checks that every error names its field first, and
// that a record ValidateRecord accepts is read back from its encoding as
// it was (what a store accepts it can read) and can be summed many times
// without overflow.
func FuzzValidateRecord(f *testing.F) {
	f.Add(int64(100), int64(10), int64(0), int64(0), 0.001, int64(time.Second), 1, 0, 1, false, int64(1735689600))
	f.Add(int64(math.MaxInt64), int64(-1), int64(MaxTokens), int64(MaxTokens+1), math.NaN(), int64(-1), -1, MaxDepth+1, 2, true, int64(-9223372036))
	f.Add(int64(0), int64(0), int64(0), int64(0), math.Inf(1), int64(MaxRecordDuration), MaxIteration, MaxDepth, 0, true, int64(9214646400))
	f.Fuzz(func(t *testing.T, in, out, cached, reasoning int64, cost float64, dur int64, iter, depth, v int, unknown bool, unix int64) {
		r := validRecord()
		r.Usage = trace.Usage{InputTokens: in, OutputTokens: out, CachedTokens: cached, ReasoningTokens: reasoning, CostUSD: cost, CostUnknown: unknown}
		r.Duration, r.Iteration, r.Depth, r.V = time.Duration(dur), iter, depth, v
		r.Time = time.Unix(unix, 0).UTC()
		err := ValidateRecord(0, &r)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			msg := re.Err.Error()
			if !slices.Contains(fields, re.Field) || !strings.HasPrefix(msg, re.Field+" ") {
				t.Fatalf("error %q (field %q) does not begin with its field's name", msg, re.Field)
			}
			return
		}
		enc := r.AppendJSON(nil)
		back, err := trace.DecodeRecord(enc)
		if err != nil {
			t.Fatalf("an accepted record does not decode: %v\n%s", err, enc)
		}
		if string(back.AppendJSON(nil)) != string(enc) {
			t.Fatalf("an accepted record changes on the way back:\n%s\n%s", enc, back.AppendJSON(nil))
		}
		// 2^23 such records' tokens sum within an int64.
		for _, n := range []int64{in, out, cached, reasoning} {
			if n > math.MaxInt64>>23 {
				t.Fatalf("accepted %d, which 2^23 records would overflow", n)
			}
		}
	})
}
