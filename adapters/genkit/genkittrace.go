package genkittrace

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/firebase/genkit/go/core/tracing"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/trace"
)

// ScopeName is the instrumentation scope of the spans Genkit Go makes
// (its tracing.Tracer).
const ScopeName = "genkit-tracer"

// DefaultMaxOpenSpans bounds the spans in progress a Processor remembers
// when Options.MaxOpenSpans is zero.
const DefaultMaxOpenSpans = 1 << 16

// Options configure a Processor. The zero value is ready to use: values
// up to trace.DefaultMaxValueBytes, no redaction, the records of each span
// without its companion otel.span record.
type Options struct {
	// MaxValueBytes bounds each recorded value and each attribute's text;
	// longer ones are replaced by Loupe's truncation marker
	// ({"$loupe":"truncated",…}). Zero means trace.DefaultMaxValueBytes;
	// negative means no limit.
	MaxValueBytes int
	// Redact, if set, sees every record before it is delivered and may
	// change its fields in place (replace them; never write into a Value's
	// bytes). redact.Default().Record fits. It is called on the goroutine
	// that ended the span, possibly concurrently.
	Redact func(r *trace.Record)
	// Tags are added to each run's run.start record, after
	// "source:genkit" and "service:<service.name>".
	Tags []string
	// KeepSpans keeps, for each span, the companion record (custom,
	// named otlp.SpanRecordName) that holds the whole span as OTLP/JSON,
	// from which otlp.Traces rebuilds the exact spans. Off, a trace holds
	// only the typed records: the span's Genkit attributes are already in
	// them, and the companion would double the trace's size.
	KeepSpans bool
	// MaxOpenSpans bounds how many spans in progress the Processor
	// remembers, so that spans of other instrumentation nested inside a
	// Genkit span are recorded too. Past it (spans that never end, or more
	// in flight than that), such spans are not recorded and are counted in
	// Stats.Skipped; Genkit's own spans always are. Zero means
	// DefaultMaxOpenSpans.
	MaxOpenSpans int
	// OnError is called with each span the mapping refused (an
	// *otlp.SpanError). The default logs it with log/slog at warning level.
	OnError func(error)
}

// Stats counts what a Processor did.
type Stats struct {
	Spans    uint64 // spans mapped to records
	Records  uint64 // records handed to the dispatcher
	Rejected uint64 // spans the mapping refused (no ids or no start time)
	Skipped  uint64 // spans of other instrumentation not recorded: outside any Genkit span, or past MaxOpenSpans
}

// A Processor is an OpenTelemetry span processor
// (go.opentelemetry.io/otel/sdk/trace.SpanProcessor) that turns Genkit's
// spans into Loupe records and hands them to a trace.Dispatcher as each
// span ends. It is safe for concurrent use. Create it with New or
// Register.
type Processor struct {
	d    *trace.Dispatcher
	o    Options
	tags []string

	mu   sync.Mutex
	open map[oteltrace.SpanID]struct{} // spans in progress that may have recorded children

	spans, records, rejected, skipped atomic.Uint64

	regMu sync.Mutex
	tp    *sdktrace.TracerProvider // where Register registered it
}

// New returns a Processor that delivers records through d, which may be a
// Tracer's (tr.Dispatcher()) or one made for a few sinks with
// trace.NewDispatcher. A nil d (a Tracer without sinks) records nothing.
// The caller owns d: shut it down (or its Tracer) to drain it. New does
// not register the Processor anywhere; see Register.
func New(d *trace.Dispatcher, o Options) *Processor {
	if o.MaxOpenSpans <= 0 {
		o.MaxOpenSpans = DefaultMaxOpenSpans
	}
	if o.OnError == nil {
		o.OnError = func(err error) {
			slog.Warn("genkittrace: span not recorded", "err", err)
		}
	}
	return &Processor{d: d, o: o, tags: append([]string{"source:genkit"}, o.Tags...),
		open: make(map[oteltrace.SpanID]struct{})}
}

// Register returns a Processor that delivers records to tr's sinks and
// registers it with Genkit's TracerProvider (tracing.TracerProvider: the
// global OpenTelemetry provider, which Genkit creates if the program has
// not set an SDK one). Spans that end from then on are recorded, those of
// every Genkit instance in the process. Call Unregister to stop. tr
// without sinks (or nil) records nothing.
func Register(tr *trace.Tracer, o Options) *Processor {
	p := New(tr.Dispatcher(), o)
	tp := tracing.TracerProvider()
	p.regMu.Lock()
	p.tp = tp
	p.regMu.Unlock()
	tp.RegisterSpanProcessor(p)
	return p
}

// Unregister removes the Processor from the provider Register added it
// to; spans that end afterwards are not recorded. It does not flush or
// shut down the tracer. Calling it again, or on a Processor made with
// New, does nothing.
func (p *Processor) Unregister() {
	p.regMu.Lock()
	tp := p.tp
	p.tp = nil
	p.regMu.Unlock()
	if tp != nil {
		tp.UnregisterSpanProcessor(p)
	}
}

// Stats returns the Processor's counters.
func (p *Processor) Stats() Stats {
	return Stats{Spans: p.spans.Load(), Records: p.records.Load(), Rejected: p.rejected.Load(), Skipped: p.skipped.Load()}
}

// isGenkit reports whether Genkit made the span.
func isGenkit(s sdktrace.ReadOnlySpan) bool {
	return s.InstrumentationScope().Name == ScopeName
}

// OnStart remembers the span while it runs if it is Genkit's or nested in
// a span remembered, so that spans nested in it are recorded too.
func (p *Processor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	id := s.SpanContext().SpanID()
	genkit := isGenkit(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !genkit {
		if _, ok := p.open[s.Parent().SpanID()]; !ok || !s.Parent().IsValid() {
			return
		}
	}
	if len(p.open) >= p.o.MaxOpenSpans {
		return
	}
	p.open[id] = struct{}{}
}

// OnEnd maps the span to records and hands them to the dispatcher.
func (p *Processor) OnEnd(s sdktrace.ReadOnlySpan) {
	id := s.SpanContext().SpanID()
	p.mu.Lock()
	_, remembered := p.open[id]
	delete(p.open, id)
	p.mu.Unlock()
	genkit := isGenkit(s)
	if !genkit && !remembered {
		p.skipped.Add(1)
		return
	}
	if p.d == nil {
		return
	}
	// The outermost Genkit span is the run, whatever span it runs under.
	root := genkit && isRoot(s)
	td := toPdata(s, root) // otlp reads Genkit Go's tool.v2 actions as tool calls
	res := otlp.Map(td, &otlp.Options{MaxValueBytes: p.o.MaxValueBytes})
	for _, e := range res.Rejected {
		p.rejected.Add(1)
		p.o.OnError(fmt.Errorf("span %s: %w", id, e))
	}
	if res.Spans == 0 {
		return
	}
	p.spans.Add(1)
	depth, nested := depths(s)
	n := uint64(0)
	for i := range res.Records {
		r := &res.Records[i]
		if r.Type == trace.TypeCustom && r.Name == otlp.SpanRecordName && !p.o.KeepSpans {
			continue
		}
		r.Depth = depth
		if nested && r.Type != trace.TypeChildSpawn && r.Type != trace.TypeChildEnd {
			r.Depth++ // inside the nested run
		}
		if r.Type == trace.TypeRunStart {
			ri := r.EditRun()
			ri.Tags = p.runTags(ri.Tags)
		}
		if p.o.Redact != nil {
			p.o.Redact(r)
		}
		p.d.Emit(*r)
		n++
	}
	p.records.Add(n)
}

// runTags replaces the mapping's "source:otlp" with "source:genkit" and
// adds Options.Tags.
func (p *Processor) runTags(mapped []string) []string {
	out := make([]string, 0, len(mapped)+len(p.tags))
	out = append(out, p.tags[0])
	for _, t := range mapped {
		if t != "source:otlp" {
			out = append(out, t)
		}
	}
	return append(out, p.tags[1:]...)
}

// Shutdown is called by the TracerProvider when it shuts down. It does
// nothing: the caller owns the Dispatcher and shuts it down.
func (p *Processor) Shutdown(context.Context) error { return nil }

// ForceFlush waits until the records of every span ended so far reached
// the sinks, or ctx is done (see trace.Dispatcher.Flush).
func (p *Processor) ForceFlush(ctx context.Context) error {
	if p.d == nil {
		return nil
	}
	return p.d.Flush(ctx)
}

// isRoot reports whether Genkit marked the span as the outermost of its
// trace (genkit:isRoot), or the span has no parent.
func isRoot(s sdktrace.ReadOnlySpan) bool {
	if !s.Parent().SpanID().IsValid() {
		return true
	}
	for _, kv := range s.Attributes() {
		if kv.Key == "genkit:isRoot" {
			return kv.Value.Type() == attribute.BOOL && kv.Value.AsBool() ||
				kv.Value.Type() == attribute.STRING && kv.Value.AsString() == "true"
		}
	}
	return false
}

// depths returns the Depth of a span's records: how many flows enclose
// it, the outermost (the run) left out, read from genkit:path
// ("/{outer,t:flow}/{inner,t:flow}/{generate,t:util}/{m,t:action,s:model}"),
// and whether the span is itself a nested flow, whose records other than
// child.spawn and child.end sit one deeper. A span without a path (not
// Genkit's) is placed at depth 0.
func depths(s sdktrace.ReadOnlySpan) (depth int, nested bool) {
	var path string
	for _, kv := range s.Attributes() {
		if kv.Key == "genkit:path" {
			path = kv.Value.AsString() // "" unless a string
			break
		}
	}
	const flow = ",t:flow}"
	segs := strings.Split(path, "}/{")
	if len(segs) < 2 {
		return 0, false // the root, or no path
	}
	// The outermost segment is the run and the last one the span itself.
	for _, seg := range segs[1 : len(segs)-1] {
		if strings.HasSuffix(seg+"}", flow) {
			depth++
		}
	}
	return depth, strings.HasSuffix(path, flow)
}

var _ sdktrace.SpanProcessor = (*Processor)(nil)
