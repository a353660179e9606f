// Package traceio reads trace files written by other tools — AgentV, omni
// (UltraRAG-style ExecutionTracer), Fragola's OpenTelemetry span export —
// and Loupe's own JSON lines, turning each into canonical trace.Records. It
// also writes Loupe JSON lines.
//
// Imports are deterministic: foreign formats lack some of Loupe's fields,
// so ids that a file does not carry are derived by hashing what it does
// carry (see each format), and Seq follows the order of the file. Importing
// the same file twice yields the same records, which a store can then
// deduplicate by record identity.
//
// Errors name the file, the line (for line-oriented formats, and for JSON
// syntax errors in whole-document formats) and the field. Records produced
// before an error are delivered first, so an importer can keep them.
package traceio

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loupe-dev/loupe/trace"
)

// Format names a trace file format.
type Format string

// The formats Read understands.
const (
	// FormatAuto asks Read to detect the format from the file's content.
	FormatAuto Format = "auto"
	// FormatLoupe is Loupe's JSON lines: one trace.Record per line.
	FormatLoupe Format = "loupe"
	// FormatAgentV is an AgentV trace file: {"text": …, "trace": [events]},
	// as a CLI agent prints it for AgentV's external-trace providers.
	FormatAgentV Format = "agentv"
	// FormatAgentVResults is AgentV's results JSONL: one evaluated test per
	// line, with a trace summary and, for some rows, the agent's messages
	// and tool calls.
	FormatAgentVResults Format = "agentv-results"
	// FormatOmni is a trace written by omni's ExecutionTracer/TraceStorage:
	// steps keyed by id, a memory pool with history, params, globals.
	FormatOmni Format = "omni"
	// FormatOTelJSONL is OpenTelemetry spans as JSON lines, one span object
	// per line (traceId, spanId, startTime [s, ns], …), as OTel file
	// exporters such as Fragola's write them. ParseFormat also accepts its
	// former name, "fragola".
	FormatOTelJSONL Format = "otel-jsonl"
	// FormatOTLP is OTLP/JSON: {"resourceSpans": …} documents, one or
	// several (one a line, as the OTel Collector's file exporter writes
	// them), mapped by package otlp (GenAI and OpenInference conventions).
	FormatOTLP Format = "otlp"

	// FormatFragola is the former name of FormatOTelJSONL.
	//
	// Deprecated: use FormatOTelJSONL; "fragola" names a product, not a format.
	FormatFragola = FormatOTelJSONL
)

// formatFragolaName is what FormatOTelJSONL was called before it was named
// after the format; ParseFormat and Read still accept it.
const formatFragolaName Format = "fragola"

// Formats returns the concrete formats, in the order Detect prefers them,
// in a new slice the caller may change.
func Formats() []Format { return slices.Clone(formats[:]) }

var formats = [...]Format{FormatLoupe, FormatAgentV, FormatAgentVResults, FormatOmni, FormatOTelJSONL, FormatOTLP}

// ParseFormat returns the Format named s ("auto" included), or an error
// listing the known names.
func ParseFormat(s string) (Format, error) {
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	if f == FormatAuto || f == "" {
		return FormatAuto, nil
	}
	if f == formatFragolaName {
		return FormatOTelJSONL, nil
	}
	if slices.Contains(formats[:], f) {
		return f, nil
	}
	names := []string{string(FormatAuto)}
	for _, k := range formats {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("unknown trace format %q (known: %s)", s, strings.Join(names, ", "))
}

// Error is a problem with an input file: where it is and what is wrong.
// Line is 0 when the position is not known; Field is "" when the problem
// is not with one field (for example a JSON syntax error).
type Error struct {
	File  string // the file name given to Read
	Line  int    // 1-based line, or 0
	Field string // JSON path of the field, e.g. "trace[3].id" or "startTime"
	Err   error  // what is wrong
}

// Error formats the error as file:line: field F: message, leaving out the
// parts that are not known.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString("field ")
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// maxDocument bounds whole-document formats (AgentV trace, omni trace),
// which are decoded in one piece.
const maxDocument = 256 << 20

// maxLine bounds one line of a JSON-lines format.
const maxLine = 64 << 20

// detectPeek is how much of a file Detect looks at.
const detectPeek = 64 << 10

// Read returns the records of the trace file r in format f (FormatAuto to
// detect it). name is used in errors and, for some formats, to derive
// trace ids (only its base name counts, so the same file imported from
// another directory keeps its ids).
//
// The sequence yields each record with a nil error. On a problem it yields
// one zero Record with an *Error (or an I/O error) and stops; records
// yielded before it are valid. Read reads r lazily, as the sequence is
// iterated; JSON-lines formats stream, whole-document formats are decoded
// in one piece (up to 256 MiB). It never panics on bad input.
func Read(r io.Reader, name string, f Format) iter.Seq2[trace.Record, error] {
	recs := read(r, name, f)
	return func(yield func(trace.Record, error) bool) {
		recs(func(rec trace.Record, _ int, err error) bool { return yield(rec, err) })
	}
}

// Located is a record with the line of the input it was read from.
type Located struct {
	Record trace.Record
	Line   int // 1-based; for a record built from a multi-line unit (a JSON document), a line of it; 0 when unknown
}

// ReadLocated is Read that also says which line each record came from, so
// that a consumer refusing a record can point at it.
func ReadLocated(r io.Reader, name string, f Format) iter.Seq2[Located, error] {
	recs := read(r, name, f)
	return func(yield func(Located, error) bool) {
		recs(func(rec trace.Record, line int, err error) bool { return yield(Located{Record: rec, Line: line}, err) })
	}
}

// read is Read and ReadLocated: the function it returns parses r and
// calls yield (which becomes source.yield) with each record and its line,
// or with an error, until yield returns false.
func read(r io.Reader, name string, f Format) func(yield func(trace.Record, int, error) bool) {
	return func(yield func(trace.Record, int, error) bool) {
		br := bufio.NewReaderSize(r, detectPeek)
		if f == FormatAuto || f == "" {
			head, err := br.Peek(detectPeek)
			if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
				yield(trace.Record{}, 0, &Error{File: name, Err: err})
				return
			}
			f, err = Detect(head)
			if err != nil {
				yield(trace.Record{}, 0, &Error{File: name, Err: err})
				return
			}
		}
		var parse func(*source) error
		switch f {
		case FormatLoupe:
			parse = readLoupe
		case FormatAgentV:
			parse = readAgentV
		case FormatAgentVResults:
			parse = readAgentVResults
		case FormatOmni:
			parse = readOmni
		case FormatOTelJSONL, formatFragolaName:
			parse = readFragola
		case FormatOTLP:
			parse = readOTLP
		default:
			_, err := ParseFormat(string(f))
			yield(trace.Record{}, 0, &Error{File: name, Err: err})
			return
		}
		s := &source{r: br, name: name, base: filepath.Base(name), yield: yield, seq: map[trace.TraceID]uint64{}}
		if err := parse(s); err != nil && err != errStop {
			yield(trace.Record{}, s.line, err)
		}
	}
}

// ReadFile reads the trace file at path in format f (FormatAuto to detect
// it; see Read). It returns the records read, the format, and the first
// error; on an error the records before it are returned too.
func ReadFile(path string, f Format) ([]trace.Record, Format, error) {
	file, f, err := OpenFile(path, f)
	if err != nil {
		return nil, f, err
	}
	defer file.Close()
	var recs []trace.Record
	for rec, err := range Read(file, path, f) {
		if err != nil {
			return recs, f, err
		}
		recs = append(recs, rec)
	}
	return recs, f, nil
}

// OpenFile opens the trace file at path for Read and tells its format: f
// itself, or, for FormatAuto, the format Detect finds in the file's first
// 64 KiB. The file is positioned at its start; the caller closes it. A file
// whose format cannot be told is closed and reported as an *Error.
func OpenFile(path string, f Format) (*os.File, Format, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, f, err
	}
	if f != FormatAuto && f != "" {
		return file, f, nil
	}
	head := make([]byte, detectPeek)
	n, err := io.ReadFull(file, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		file.Close()
		return nil, FormatAuto, &Error{File: path, Err: err}
	}
	if f, err = Detect(head[:n]); err != nil {
		file.Close()
		return nil, FormatAuto, &Error{File: path, Err: err}
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		file.Close()
		return nil, f, err
	}
	return file, f, nil
}

// Detect tells the format of a trace file from its first bytes (the first
// 64 KiB are plenty). It looks at the top-level keys of the first JSON
// object: "v"+"trace_id" is Loupe, "traceId"/"spanId" is OpenTelemetry
// (Fragola), "resourceSpans" is OTLP/JSON, "steps"/"root_step_id"/"memory_pool" is omni, "test_id" is an
// AgentV result row, and "trace" is an AgentV trace file.
func Detect(head []byte) (Format, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	keys, err := topKeys(head)
	if len(bytes.TrimSpace(head)) == 0 {
		err = errors.New("empty file")
	}
	if len(keys) == 0 {
		if err == nil {
			err = errors.New("empty file")
		}
		return "", fmt.Errorf("not a JSON trace file (%v); pass the format explicitly", err)
	}
	has := func(k string) bool { return slices.Contains(keys, k) }
	switch {
	case has("v") && has("trace_id"):
		return FormatLoupe, nil
	case has("traceId") || has("spanId"):
		return FormatOTelJSONL, nil
	case has("resourceSpans"):
		return FormatOTLP, nil
	case has("steps") || has("root_step_id") || has("memory_pool"):
		return FormatOmni, nil
	case has("test_id") || has("testId") || has("eval_id"):
		return FormatAgentVResults, nil
	case has("trace"):
		return FormatAgentV, nil
	}
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "", fmt.Errorf("unknown trace format: top-level keys are %s; pass the format explicitly (loupe, agentv, agentv-results, omni, otel-jsonl, otlp)", strings.Join(keys, ", "))
}

// topKeys returns the top-level keys of the first JSON object in b, as far
// as b goes: a value cut off at the end of b stops the scan, not the keys
// seen so far.
func topKeys(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("the file starts with %v, not a JSON object", tok)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys, err
		}
		k, ok := tok.(string)
		if !ok {
			return keys, nil
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys, nil
		}
	}
	return keys, nil
}

// errStop is returned by source.emit when the consumer stopped iterating.
var errStop = errors.New("traceio: stopped")

// source is the state shared by the parsers: the input, the consumer and
// the per-trace sequence numbers.
type source struct {
	r     *bufio.Reader
	name  string // as given, for errors
	base  string // base name, for derived ids
	yield func(trace.Record, int, error) bool
	seq   map[trace.TraceID]uint64
	line  int
	held  *[]trace.Record // when set, emit collects records here instead of yielding them
}

// emit assigns V and the next Seq of r's trace and hands r to the consumer.
func (s *source) emit(r trace.Record) error {
	r.V = trace.Version
	if r.Seq == 0 {
		s.seq[r.TraceID]++
		r.Seq = s.seq[r.TraceID]
	}
	r.Time = r.Time.UTC()
	if s.held != nil {
		*s.held = append(*s.held, r)
		return nil
	}
	if !s.yield(r, s.line, nil) {
		return errStop
	}
	return nil
}

// whole runs fn with emitted records held back, and delivers them only if
// fn succeeds, so that a unit of input (one row) is imported whole or not
// at all.
func (s *source) whole(fn func() error) error {
	var held []trace.Record
	s.held = &held
	err := fn()
	s.held = nil
	if err != nil {
		return err
	}
	for _, r := range held {
		if !s.yield(r, s.line, nil) {
			return errStop
		}
	}
	return nil
}

// errf returns an *Error at the current line.
func (s *source) errf(field string, format string, args ...any) error {
	return &Error{File: s.name, Line: s.line, Field: field, Err: fmt.Errorf(format, args...)}
}

// lines calls fn with each non-blank line, tracking the line number.
func (s *source) lines(fn func(line []byte) error) error {
	sc := bufio.NewScanner(s.r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		s.line++
		b := bytes.TrimSpace(sc.Bytes())
		if s.line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		if len(b) == 0 {
			continue
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		s.line++
		if errors.Is(err, bufio.ErrTooLong) {
			return s.errf("", "line longer than %d MiB; a record this large is not a trace line (is the file JSON lines?)", maxLine>>20)
		}
		return s.errf("", "%v", err)
	}
	return nil
}

// document reads the whole input (up to maxDocument) and decodes it into
// v, turning decode errors into *Errors with a line and field.
func (s *source) document(v any) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(s.r, maxDocument+1))
	if err != nil {
		return nil, &Error{File: s.name, Err: err}
	}
	if len(data) > maxDocument {
		return nil, &Error{File: s.name, Err: fmt.Errorf("larger than %d MiB; split it", maxDocument>>20)}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if err := json.Unmarshal(data, v); err != nil {
		return data, jsonError(s.name, data, 0, err)
	}
	return data, nil
}

// object reads the whole input as one JSON object: it decodes it into v
// (see document) and also returns its top-level members in file order,
// with their offsets, so that errors can name a line.
func (s *source) object(v any) (data []byte, top []member, err error) {
	data, err = s.document(v)
	if err != nil {
		return nil, nil, err
	}
	top, err = members(data, 0)
	if err != nil {
		return nil, nil, &Error{File: s.name, Line: 1, Err: err}
	}
	return data, top, nil
}

// jsonError converts an encoding/json error about data into an *Error with
// the line (counted from firstLine) and the field it concerns.
func jsonError(name string, data []byte, firstLine int, err error) *Error {
	e := &Error{File: name, Line: firstLine, Err: err}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		if firstLine == 0 {
			e.Line = lineAt(data, se.Offset)
		}
		e.Err = fmt.Errorf("not valid JSON: %v", se)
	case errors.As(err, &te):
		if firstLine == 0 {
			e.Line = lineAt(data, te.Offset)
		}
		e.Field = te.Field
		e.Err = fmt.Errorf("want %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		e.Err = errors.New("not valid JSON: unexpected end of input")
	}
	return e
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// Derived ids: SHA-256 of the parts, NUL-separated, truncated; never zero.

func traceIDOf(parts ...string) trace.TraceID {
	var id trace.TraceID
	copy(id[:], digest(parts))
	if id.IsZero() {
		id[15] = 1
	}
	return id
}

func spanIDOf(tid trace.TraceID, parts ...string) trace.SpanID {
	var id trace.SpanID
	copy(id[:], digest(append([]string{string(tid[:])}, parts...)))
	if id.IsZero() {
		id[7] = 1
	}
	return id
}

func digest(parts []string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// jsonValue returns raw as a compact trace.Value (so that a record stays
// one line and equal values are equal bytes), nil for absent or null.
func jsonValue(raw json.RawMessage) trace.Value {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if bytes.ContainsAny(raw, " \t\r\n") {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return trace.Value(b.Bytes())
		}
	}
	return trace.Value(slices.Clone(raw))
}
