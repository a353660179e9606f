package trace

import (
	"context"
	"strconv"
	"time"
)

// Severity numbers of OpenTelemetry's log data model: each range of four
// (TRACE 1–4, DEBUG 5–8, INFO 9–12, WARN 13–16, ERROR 17–20, FATAL 21–24)
// starts at the constant below. log/slog's levels map onto them as
// SeverityInfo + level (slog.LevelDebug is -4, LevelWarn 4, LevelError
// 8), as OpenTelemetry's slog bridge maps them.
const (
	SeverityTrace = 1
	SeverityDebug = 5
	SeverityInfo  = 9
	SeverityWarn  = 13
	SeverityError = 17
	SeverityFatal = 21
)

// SeverityText returns the short name OpenTelemetry gives severity number
// n: "INFO" for 9, "INFO2" for 10, …, "FATAL4" for 24, and "" for a number
// outside 1–24.
func SeverityText(n int) string {
	if n < 1 || n > 24 {
		return ""
	}
	name := [...]string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}[(n-1)/4]
	if k := (n-1)%4 + 1; k > 1 {
		name += strconv.Itoa(k)
	}
	return name
}

// A LogEntry is one log record written during a run, for
// ExecutionContext.Log and Log. The zero value is an empty record of
// unknown severity.
type LogEntry struct {
	Name           string    // the logger or event name; may be empty
	Severity       string    // the severity text; empty means SeverityText(SeverityNumber)
	SeverityNumber int       // OpenTelemetry's 1 (TRACE) to 24 (FATAL4); 0 when unknown
	Body           Value     // the message, usually a JSON string
	Attributes     Value     // the record's attributes as one JSON object, or nil
	Time           time.Time // when it was written; zero means when it is recorded
}

// Record returns the log record e describes, as ExecutionContext.Log
// records it (see TypeLog): Type, Name, Status, Error, Output and Time
// are set; ids and Seq are left for the recorder (or the caller) to fill.
// A Body or Attributes that is not valid JSON is kept as a JSON string.
func (e LogEntry) Record() Record {
	n := e.SeverityNumber
	if n < 1 || n > 24 {
		n = 0
	}
	status := e.Severity
	if status == "" {
		status = SeverityText(n)
	}
	r := Record{Type: TypeLog, Name: e.Name, Status: status, Time: e.Time}
	var b []byte
	add := func(key string) {
		if b == nil {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = appendJSONString(b, key)
		b = append(b, ':')
	}
	if len(e.Body) > 0 {
		add("body")
		b = append(b, Raw(e.Body)...)
	}
	if len(e.Attributes) > 0 {
		add("attributes")
		b = append(b, Raw(e.Attributes)...)
	}
	if n != 0 {
		add("severity_number")
		b = strconv.AppendInt(b, int64(n), 10)
	}
	if b != nil {
		r.Output = append(b, '}')
	}
	if n >= SeverityError {
		r.Error = e.Body.Text()
		if len(e.Body) == 0 || r.Error == "" {
			r.Error = status
		}
	}
	return r
}

// Log records e (a log record type log, see TypeLog) under the run's
// current iteration, or the run itself between iterations. Log (the
// package function) records under the span in progress in a context
// instead. It is a no-op on a nil ExecutionContext.
func (ec *ExecutionContext) Log(e LogEntry) {
	if ec != nil {
		ec.Record(e.Record())
	}
}

// Log records e into the run ctx carries (see FromContext), under the
// span in progress in ctx when it is one of that run's (a tool call's, as
// the agent runtime passes it to the tool: see Span.Context), else under
// the run's current iteration. Without a run in ctx it records nothing.
// It is safe for concurrent use.
func Log(ctx context.Context, e LogEntry) {
	ec := FromContext(ctx)
	if ec == nil {
		return
	}
	r := e.Record()
	if s, ok := ctx.Value(spanKey{}).(spanRef); ok && s.ec == ec {
		r.ParentID = s.id
	}
	ec.Record(r)
}

// Entry returns the LogEntry a log record r was made from: its Name,
// Status (as Severity), Time and the body, attributes and severity number
// of its Output. It reports false if r is not a log record; an Output
// that is not the object TypeLog describes (redacted, truncated) comes
// back as the Body.
func (r *Record) Entry() (LogEntry, bool) {
	if r.Type != TypeLog {
		return LogEntry{}, false
	}
	e := LogEntry{Name: r.Name, Severity: r.Status, Time: r.Time}
	var out struct {
		Body       Value `json:"body"`
		Attributes Value `json:"attributes"`
		Severity   int   `json:"severity_number"`
	}
	if len(r.Output) > 0 && r.Output[0] == '{' && r.Output.Decode(&out) == nil && !isMarker(r.Output) {
		e.Body, e.Attributes, e.SeverityNumber = out.Body, out.Attributes, out.Severity
	} else {
		e.Body = r.Output
	}
	return e, true
}

// isMarker reports whether v is one of the recorder's markers
// ({"$loupe":…}), which stands for a value rather than holding it.
func isMarker(v Value) bool {
	var m struct {
		Loupe *string `json:"$loupe"`
	}
	return v.Decode(&m) == nil && m.Loupe != nil
}
