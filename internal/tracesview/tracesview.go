// Package tracesview is what `loupe traces` does, apart from flag parsing:
// it lists, shows, searches, imports and exports the traces of a
// store.Store and renders them for people (tables, span trees, search hits
// with the match bracketed) and machines (JSON, JSON lines).
//
// Functions here write to an io.Writer and take a store.Store opened by
// the caller; they hold no state and are safe for concurrent use as far as
// the Store is.
package tracesview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/loupe-dev/loupe/export/console"
	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/price"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// Table writes trace summaries as an aligned table, one trace per line:
// id (first 12 hex digits, enough to name it), name, start (UTC),
// duration, status (with "N lost" when the recorder lost records of the
// trace), steps (iterations, or model calls for runs without an iteration
// loop), tool calls, tokens (in/out), cost ("$0.0123 + ?" or "unknown"
// when some calls have no price) and errors. When a trace of sums
// belongs to a session, a SESSION column follows the name.
func Table(w io.Writer, sums []store.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	withSession := slices.ContainsFunc(sums, func(s store.Summary) bool { return s.Session != "" })
	if withSession {
		fmt.Fprint(tw, "ID\tNAME\tSESSION\tSTARTED\tDURATION\tSTATUS\tSTEPS\tTOOLS\tTOKENS\tCOST\tERRORS\n")
	} else {
		fmt.Fprintln(tw, "ID\tNAME\tSTARTED\tDURATION\tSTATUS\tSTEPS\tTOOLS\tTOKENS\tCOST\tERRORS")
	}
	for i := range sums {
		s := &sums[i]
		steps := s.Iterations
		if steps == 0 {
			steps = s.ModelCalls
		}
		name := orDash(s.Name)
		if withSession {
			name += "\t" + orDash(cell(s.Session))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\n",
			s.ID.String()[:12], name, s.Started.UTC().Format("2006-01-02 15:04:05"),
			console.Duration(s.Duration), status(s), steps, s.ToolCalls,
			tokens(s.InputTokens, s.OutputTokens), cost(s.CostUSD, s.UnpricedCalls), s.Errors)
	}
	return tw.Flush()
}

// status is s's status, followed by how many records were lost, if any.
func status(s *store.Summary) string {
	if s.Lost > 0 {
		return s.Status + " (" + strconv.FormatInt(s.Lost, 10) + " lost)"
	}
	return s.Status
}

// incompleteNote says why s is incomplete, or "" if it is not.
func incompleteNote(s *store.Summary) string {
	var why []string
	if s.Lost > 0 {
		n := "records"
		if s.Lost == 1 {
			n = "record"
		}
		why = append(why, fmt.Sprintf("%d %s lost by the recorder (not in this trace)", s.Lost, n))
	}
	if s.Status == store.StatusIncomplete {
		why = append(why, "the run never ended (silent since "+s.Started.Add(s.Duration).UTC().Format(time.RFC3339)+"; its process probably died)")
	}
	if len(why) == 0 {
		return ""
	}
	return "incomplete: " + strings.Join(why, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tokens(in, out int64) string {
	if in == 0 && out == 0 {
		return "-"
	}
	return strconv.FormatInt(in, 10) + "/" + strconv.FormatInt(out, 10)
}

// cost is "-" for a trace that cost nothing known and has no call of
// unknown cost, else price.Format's "$0.0123", "$0.0123 + ?" or "unknown":
// a call whose model has no price is never shown as $0.
func cost(usd float64, unpriced int) string {
	if usd == 0 && unpriced == 0 {
		return "-"
	}
	return price.Format(usd, unpriced)
}

// ShowOptions control Show.
type ShowOptions struct {
	IO    bool // print each span's input, output and thinking
	MaxIO int  // bound on each printed value (0: console's default; negative: none)
}

// Show writes one trace for people: a header (name, status, start,
// duration, tags, error, and why the trace is incomplete if it is), the span tree with durations, tokens, cost and
// errors (printed by export/console), and the memory pool: parameters,
// globals, and each memory key's history with the step that wrote each
// value.
func Show(w io.Writer, t *store.Trace, o ShowOptions) error {
	bw := bufio.NewWriter(w)
	s := &t.Summary
	fmt.Fprintf(bw, "%s  %s  %s  started %s  took %s\n", s.ID, orDash(s.Name), status(s),
		s.Started.UTC().Format(time.RFC3339Nano), console.Duration(s.Duration))
	if note := incompleteNote(s); note != "" {
		fmt.Fprintln(bw, note)
	}
	if len(s.Tags) > 0 {
		fmt.Fprintf(bw, "tags: %s\n", strings.Join(s.Tags, " "))
	}
	for i := range t.Records {
		if r := &t.Records[i]; r.Type == trace.TypeRunEnd && r.Depth == 0 && r.Error != "" {
			fmt.Fprintf(bw, "error: %s\n", oneLine(r.Error, 500))
		}
	}
	// The otel.span records that keep received OpenTelemetry spans whole
	// are for export, not for reading: the tree leaves them out.
	recs, kept := t.Records, 0
	for i := range t.Records {
		if r := &t.Records[i]; r.Type == trace.TypeCustom && r.Name == otlp.SpanRecordName {
			kept++
		}
	}
	if kept > 0 {
		recs = make([]trace.Record, 0, len(t.Records)-kept)
		for _, r := range t.Records {
			if r.Type != trace.TypeCustom || r.Name != otlp.SpanRecordName {
				recs = append(recs, r)
			}
		}
	}
	if err := console.Tree(bw, recs, console.Options{IO: o.IO, MaxIO: o.MaxIO}); err != nil {
		return err
	}
	if kept > 0 {
		fmt.Fprintf(bw, "(%d OpenTelemetry spans kept whole in %s records; --json shows them)\n", kept, otlp.SpanRecordName)
	}
	writeMemory(bw, t)
	return bw.Flush()
}

// writeMemory prints the memory pool, keys sorted.
func writeMemory(w io.Writer, t *store.Trace) {
	m := &t.Memory
	if len(m.Params) == 0 && len(m.Globals) == 0 && len(m.History) == 0 {
		return
	}
	bySeq := map[uint64]*trace.Record{}
	spanName := map[trace.SpanID]string{}
	for i := range t.Records {
		r := &t.Records[i]
		bySeq[r.Seq] = r
		if _, ok := spanName[r.SpanID]; !ok || spanName[r.SpanID] == "" {
			spanName[r.SpanID] = r.Name
		}
	}
	fmt.Fprintln(w, "memory pool:")
	for _, scope := range []struct {
		label string
		vals  map[string]trace.Value
	}{{"param", m.Params}, {"global", m.Globals}} {
		for _, k := range sortedKeys(scope.vals) {
			fmt.Fprintf(w, "  %s %s = %s\n", scope.label, k, oneLine(scope.vals[k].String(), 200))
		}
	}
	for _, k := range sortedKeys(m.History) {
		fmt.Fprintf(w, "  memory %s (%d writes)\n", k, len(m.History[k]))
		for _, wr := range m.History[k] {
			by := ""
			if r := bySeq[wr.Seq]; r != nil && !r.ParentID.IsZero() {
				by = " by " + orDash(spanName[r.ParentID])
			}
			fmt.Fprintf(w, "    step %d%s (seq %d): %s\n", wr.Step, by, wr.Seq, oneLine(wr.Value.String(), 200))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// oneLine flattens s to one line of at most n bytes (plus a marker).
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > n {
		cut := n
		for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}

// TraceJSON is the whole trace as `loupe traces show --json` prints it.
type TraceJSON struct {
	Summary store.Summary  `json:"summary"`
	Stats   trace.Stats    `json:"stats"`
	Memory  store.Memory   `json:"memory"`
	Spans   []*store.Span  `json:"spans"`
	Records []trace.Record `json:"records"`
}

// WriteJSON writes v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WritePage writes one page of a listing as every `ls` of the CLI
// prints it: the page v as JSON, or the table that table writes on out
// followed, on errw, by the cursor of the next page when there is one
// (next), so that a pipe of the table holds the rows only.
func WritePage(out, errw io.Writer, asJSON bool, v any, table func(io.Writer) error, next string) error {
	if asJSON {
		return WriteJSON(out, v)
	}
	if err := table(out); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(errw, "more: --cursor %s\n", next)
	}
	return nil
}

// Hits writes search hits, one per line: the trace (id prefix and name),
// the record (seq, type, name), the field that matched and a snippet in
// which each query word and phrase is [bracketed].
func Hits(w io.Writer, hits []store.Hit, q store.Query) error {
	bw := bufio.NewWriter(w)
	for _, h := range hits {
		fmt.Fprintf(bw, "%s %s  #%d %s", h.TraceID.String()[:12], orDash(h.TraceName), h.Seq, h.Type)
		if h.Name != "" {
			fmt.Fprintf(bw, " %s", h.Name)
		}
		if h.Field != "" {
			fmt.Fprintf(bw, "  %s: %s", h.Field, Highlight(oneLine(h.Snippet, 400), q))
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// Highlight brackets each case-insensitive occurrence of q's words (as
// whole words) and phrases in s.
func Highlight(s string, q store.Query) string {
	terms := append(slices.Clone(q.Phrases), q.Words...)
	if len(terms) == 0 {
		return s
	}
	lower := asciiLower(s)         // same length as s, so offsets carry over
	mark := make([]bool, len(s)+1) // mark[i]: a match covers byte i
	for _, t := range terms {
		t = asciiLower(t)
		if t == "" {
			continue
		}
		for i := 0; i+len(t) <= len(lower); {
			j := strings.Index(lower[i:], t)
			if j < 0 {
				break
			}
			a, b := i+j, i+j+len(t)
			if isWordBoundary(lower, a, b) {
				for k := a; k < b; k++ {
					mark[k] = true
				}
			}
			i = a + 1
		}
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if mark[i] && (i == 0 || !mark[i-1]) {
			out.WriteByte('[')
		}
		out.WriteByte(s[i])
		if mark[i] && !mark[i+1] {
			out.WriteByte(']')
		}
	}
	return out.String()
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isWordBoundary(s string, a, b int) bool {
	word := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
	}
	return (a == 0 || !word(s[a-1])) && (b == len(s) || !word(s[b]))
}

// ImportResult reports one imported file.
type ImportResult struct {
	File    string         `json:"file"`
	Format  traceio.Format `json:"format"`
	Records int            `json:"records"` // records read from the file
	Added   int            `json:"added"`   // of which new to the store
	Traces  int            `json:"traces"`  // distinct traces read
	// Refused counts the records that were not stored because the store
	// refused them (the rest of the file was stored); RefusedRecords lists
	// the first maxListed of them with their lines.
	Refused        int       `json:"refused,omitempty"`
	RefusedRecords []Refused `json:"refused_records,omitempty"`
	// Conflicts counts records that repeat the (trace id, seq) of an
	// earlier record of the file with different content: the store keeps
	// the first copy. Identical repeats are not counted.
	Conflicts int `json:"conflicts,omitempty"`
	// SeqGaps counts the seqs missing between the lowest and the highest
	// seq of each trace in the file, and GapTraces the traces with any.
	SeqGaps   int      `json:"seq_gaps,omitempty"`
	GapTraces int      `json:"gap_traces,omitempty"`
	Warnings  []string `json:"warnings,omitempty"` // the conflicts and gaps, said in words
	// Priced counts the model calls read with tokens but no cost that
	// were given one from the price table; Unpriced those whose model it
	// does not know, stored with an unknown cost (not $0).
	Priced   int    `json:"priced,omitempty"`
	Unpriced int    `json:"unpriced,omitempty"`
	Err      error  `json:"-"` // the first problem; the records read without problems are stored
	Error    string `json:"error,omitempty"`
}

// Refused is one record of an imported file that the store refused.
type Refused struct {
	Line    int           `json:"line,omitempty"` // 1-based; 0 when the format has no lines to name
	TraceID trace.TraceID `json:"trace_id"`
	Seq     uint64        `json:"seq"`
	Type    trace.Type    `json:"type"`
	Error   string        `json:"error"`
}

// importBatch is how many records Import appends at a time.
const importBatch = 1000

// maxListed bounds ImportResult.RefusedRecords.
const maxListed = 100

// maxStoreRefusals is how many records the store may refuse for reasons
// ValidateRecord does not know (a failing database rather than bad
// records, most likely) before Import gives up on the file.
const maxStoreRefusals = 20

// Import reads the trace file at path in format f (traceio.FormatAuto to
// detect it) and appends its records to st in batches.
//
// A record the store refuses (store.ValidateRecord's checks, or an Append
// error the store gives for that record alone) is reported with its line
// and left out; every other record of the file is still stored: a batch
// that fails is retried without the record a *store.RecordError names, or
// split in halves until the failing records are isolated. A problem
// reading the file stops the import there; what was read before it is
// stored. Repeated (trace, seq) pairs with different content and gaps in
// a trace's seqs are counted and described in Warnings; they are not
// errors. Err is set when a record was refused or the file could not be
// read to its end.
func Import(ctx context.Context, st store.Store, path string, f traceio.Format) ImportResult {
	return importFile(ctx, st, path, f, nil)
}

// importFile is Import pricing with prices (see importReader).
func importFile(ctx context.Context, st store.Store, path string, f traceio.Format, prices *price.Table) ImportResult {
	file, err := os.Open(path)
	if err != nil {
		res := ImportResult{File: path, Format: f}
		res.Err, res.Error = err, err.Error()
		return res
	}
	defer file.Close()
	return importReader(ctx, st, path, file, f, prices)
}

// detectPeek is how much of an input ImportReader looks at to tell its
// format (traceio.Detect needs no more).
const detectPeek = 64 << 10

// ImportReader is Import reading from r, named name in messages (for
// standard input, "-" or "stdin"). It reads r once, front to back: r need
// not be seekable.
func ImportReader(ctx context.Context, st store.Store, name string, r io.Reader, f traceio.Format) ImportResult {
	return importReader(ctx, st, name, r, f, nil)
}

// importReader is ImportReader that, when prices is not nil, gives the
// model calls that carry tokens but no cost the cost prices says (or
// marks it unknown), as the collector does at ingest
// (price.Table.PriceRecord).
func importReader(ctx context.Context, st store.Store, name string, r io.Reader, f traceio.Format, prices *price.Table) ImportResult {
	res := ImportResult{File: name, Format: f}
	fail := func(err error) ImportResult {
		res.Err, res.Error = err, err.Error()
		return res
	}
	br := bufio.NewReaderSize(r, detectPeek)
	head, err := br.Peek(detectPeek)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return fail(&traceio.Error{File: name, Err: err})
	}
	// what is set when the file is recognizably something other than a
	// trace; it replaces the parser's error, which says only what byte
	// was unexpected.
	what := notATrace(head)
	if f == traceio.FormatAuto || f == "" {
		if f, err = traceio.Detect(head); err != nil {
			if what != "" {
				err = errors.New(what)
			}
			return fail(&traceio.Error{File: name, Err: err})
		}
	}
	res.Format = f
	im := &importer{ctx: ctx, st: st, prices: prices, path: name, res: &res, seen: map[trace.TraceID]map[uint64]seqInfo{}, seed: maphash.MakeSeed()}
	var readErr error
	for loc, err := range traceio.ReadLocated(br, name, res.Format) {
		if err != nil {
			readErr = err
			break
		}
		if err := im.add(loc); err != nil {
			return fail(err)
		}
	}
	if err := im.flush(); err != nil {
		return fail(err)
	}
	im.warn()
	var refusedErr error
	if res.Refused > 0 {
		first := res.RefusedRecords[0]
		refusedErr = fmt.Errorf("%s: the store refused %d of %d records (the others were stored); the first: %s",
			name, res.Refused, res.Records, im.where(first.Line, first.TraceID, first.Seq)+": "+first.Error)
	}
	if readErr != nil && res.Records == 0 && what != "" {
		readErr = &traceio.Error{File: name, Err: fmt.Errorf("%s (read as %s: %w)", what, res.Format, readErr)}
	}
	if err := errors.Join(readErr, refusedErr); err != nil {
		return fail(err)
	}
	return res
}

// ProgressMinSize is the smallest file ImportInputs shows a progress bar
// for: smaller ones import in well under a second.
const ProgressMinSize = 4 << 20

// importWithProgress is Import with a progress bar of the bytes read on
// progress, for files of at least ProgressMinSize.
func importWithProgress(ctx context.Context, st store.Store, path string, f traceio.Format, progress io.Writer, prices *price.Table) ImportResult {
	if progress == nil {
		return importFile(ctx, st, path, f, prices)
	}
	file, err := os.Open(path)
	if err != nil {
		return importFile(ctx, st, path, f, prices) // reports the error as Import does
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < ProgressMinSize {
		return importReader(ctx, st, path, file, f, prices)
	}
	bar := progressbar.NewOptions64(fi.Size(),
		progressbar.OptionSetWriter(progress),
		progressbar.OptionSetDescription("importing "+filepath.Base(path)),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	res := importReader(ctx, st, path, io.TeeReader(file, bar), f, prices)
	bar.Finish()
	return res
}

// ImportInput is one input of ImportFiles: a file, or standard input.
type ImportInput struct {
	Name string    // the path, or "-" for standard input
	R    io.Reader // when non-nil, read instead of opening Name
}

// ExpandInputs turns command-line arguments into inputs: "-" is stdin
// (at most once), a folder stands for the regular files directly in it, in
// name order, leaving out hidden files (names starting with "."), and
// anything else is a file path, opened when it is imported.
func ExpandInputs(args []string, stdin io.Reader) ([]ImportInput, error) {
	var in []ImportInput
	sawStdin := false
	for _, a := range args {
		if a == "-" {
			if sawStdin {
				return nil, errors.New(`"-" (standard input) given twice`)
			}
			sawStdin = true
			in = append(in, ImportInput{Name: "-", R: stdin})
			continue
		}
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			in = append(in, ImportInput{Name: a}) // Import reports a missing file
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
				continue
			}
			in = append(in, ImportInput{Name: filepath.Join(a, e.Name())})
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: folder has no files to import", a)
		}
	}
	return in, nil
}

// seqInfo is what Import remembers of a (trace, seq) it has read.
type seqInfo struct {
	hash uint64 // of the record's encoding
	line int
}

// importer is the state of one Import.
type importer struct {
	ctx    context.Context
	st     store.Store
	prices *price.Table // prices calls with tokens but no cost; nil: leave them
	path   string
	res    *ImportResult
	seen   map[trace.TraceID]map[uint64]seqInfo
	seed   maphash.Seed
	buf    []byte
	recs   []trace.Record // the batch
	lines  []int          // the line of each record of the batch
	// storeRefusals counts refusals that ValidateRecord did not predict.
	storeRefusals int
	firstConflict string
}

// add takes one record read from the file.
func (im *importer) add(loc traceio.Located) error {
	res, r := im.res, &loc.Record
	res.Records++
	if im.prices != nil && im.prices.PriceRecord(r) {
		if r.Usage.CostUnknown {
			res.Unpriced++
		} else {
			res.Priced++
		}
	}
	bySeq := im.seen[r.TraceID]
	if bySeq == nil {
		bySeq = map[uint64]seqInfo{}
		im.seen[r.TraceID] = bySeq
		res.Traces++
	}
	// A record whose seq is out of range takes no part in the conflict and
	// gap checks (its seq is what is wrong with it); one refused for
	// another reason still fills its seq.
	if r.Seq >= 1 && r.Seq <= math.MaxInt64 {
		im.buf = r.AppendJSON(im.buf[:0])
		h := maphash.Bytes(im.seed, im.buf)
		if prev, dup := bySeq[r.Seq]; dup {
			if prev.hash != h {
				res.Conflicts++
				if im.firstConflict == "" {
					im.firstConflict = fmt.Sprintf("%s repeats %s with different content", im.where(loc.Line, r.TraceID, r.Seq), lineName(prev.line))
				}
			}
			return nil // the store would keep the first copy anyway
		}
		bySeq[r.Seq] = seqInfo{hash: h, line: loc.Line}
	}
	if err := store.ValidateRecord(0, r); err != nil {
		var re *store.RecordError
		if errors.As(err, &re) {
			err = re.Err
		}
		im.refuse(loc.Line, r, err)
		return nil
	}
	im.recs = append(im.recs, loc.Record)
	im.lines = append(im.lines, loc.Line)
	if len(im.recs) == importBatch {
		return im.flush()
	}
	return nil
}

// flush stores the batch.
func (im *importer) flush() error {
	err := im.store(im.recs, im.lines)
	im.recs, im.lines = im.recs[:0], im.lines[:0]
	return err
}

// store appends recs (read from lines) and, if the store refuses the
// batch, stores all of it but the records it refuses. It returns an error
// only when the import cannot go on.
func (im *importer) store(recs []trace.Record, lines []int) error {
	if len(recs) == 0 {
		return nil
	}
	n, err := im.st.Append(im.ctx, recs)
	if err == nil {
		im.res.Added += n
		return nil
	}
	if cerr := im.ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: storing records: %w", im.path, err)
	}
	var re *store.RecordError
	if errors.As(err, &re) && re.Index >= 0 && re.Index < len(recs) && recs[re.Index].TraceID == re.TraceID && recs[re.Index].Seq == re.Seq {
		i := re.Index
		if err := im.refuseByStore(lines[i], &recs[i], re.Err); err != nil {
			return err
		}
		if err := im.store(recs[:i], lines[:i]); err != nil {
			return err
		}
		return im.store(recs[i+1:], lines[i+1:])
	}
	if len(recs) == 1 {
		return im.refuseByStore(lines[0], &recs[0], err)
	}
	half := len(recs) / 2
	if err := im.store(recs[:half], lines[:half]); err != nil {
		return err
	}
	return im.store(recs[half:], lines[half:])
}

// refuseByStore records a refusal the store made, and gives up on the file
// after maxStoreRefusals of them.
func (im *importer) refuseByStore(line int, r *trace.Record, err error) error {
	im.refuse(line, r, err)
	if im.storeRefusals++; im.storeRefusals >= maxStoreRefusals {
		return fmt.Errorf("%s: the store refused %d records, the last at %s: %w; giving up on this file (is the store writable?)",
			im.path, im.storeRefusals, im.where(line, r.TraceID, r.Seq), err)
	}
	return nil
}

// refuse counts and lists one refused record.
func (im *importer) refuse(line int, r *trace.Record, err error) {
	im.res.Refused++
	if len(im.res.RefusedRecords) < maxListed {
		im.res.RefusedRecords = append(im.res.RefusedRecords, Refused{Line: line, TraceID: r.TraceID, Seq: r.Seq, Type: r.Type, Error: err.Error()})
	}
}

// where names a record of the file: file:line, trace and seq.
func (im *importer) where(line int, id trace.TraceID, seq uint64) string {
	at := im.path
	if line > 0 {
		at += ":" + strconv.Itoa(line)
	}
	return fmt.Sprintf("%s (trace %s seq %d)", at, id, seq)
}

func lineName(line int) string {
	if line > 0 {
		return "line " + strconv.Itoa(line)
	}
	return "an earlier record"
}

// warn counts the seq gaps and words the warnings.
func (im *importer) warn() {
	res := im.res
	if res.Conflicts > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %d records repeat the trace and seq of an earlier record with different content; the first copy is kept (first: %s)",
			im.path, res.Conflicts, im.firstConflict))
	}
	var first string
	ids := make([]trace.TraceID, 0, len(im.seen))
	for id := range im.seen {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b trace.TraceID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		seqs := slices.Sorted(maps.Keys(im.seen[id]))
		missing := 0
		for i := 1; i < len(seqs); i++ {
			if d := seqs[i] - seqs[i-1]; d > 1 {
				if first == "" {
					first = fmt.Sprintf("trace %s lacks seqs %d-%d", id, seqs[i-1]+1, seqs[i]-1)
					if d == 2 {
						first = fmt.Sprintf("trace %s lacks seq %d", id, seqs[i-1]+1)
					}
				}
				missing += int(min(d-1, math.MaxInt32))
			}
		}
		if missing > 0 {
			res.SeqGaps += missing
			res.GapTraces++
		}
	}
	if res.SeqGaps > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %d seqs missing in %d traces (first: %s); records were lost before this file was written, or the file holds part of a trace",
			im.path, res.SeqGaps, res.GapTraces, first))
	}
}

// ImportOptions say how ImportFiles and ImportInputs read and report.
// Out and Err are required; the zero value of every other field is
// useful.
type ImportOptions struct {
	// Out receives a line per file, or with JSON the results as one
	// JSON array; Err each failure, refused record and warning as it
	// happens.
	Out, Err io.Writer
	// Progress, if not nil, gets a progress bar of the bytes read for
	// each file of at least ProgressMinSize (meant for a terminal;
	// cleared when the file is done).
	Progress io.Writer
	// Format is the files' format; "" or traceio.FormatAuto detects it.
	Format traceio.Format
	// JSON writes the results to Out as JSON.
	JSON bool
	// Prices, if not nil, prices model calls read with tokens but no
	// cost, or marks them of unknown cost, as `loupe serve` does
	// (price.Table.PriceRecord).
	Prices *price.Table
}

// ImportFiles imports each file in paths in turn (see Import) and reports
// as o says. A bad file does not stop the others; when any failed, the
// error wraps ErrSome.
func ImportFiles(ctx context.Context, st store.Store, paths []string, o ImportOptions) error {
	in := make([]ImportInput, len(paths))
	for i, p := range paths {
		in[i] = ImportInput{Name: p}
	}
	return ImportInputs(ctx, st, in, o)
}

// ImportInputs is ImportFiles for inputs that may include standard input
// (see ExpandInputs).
func ImportInputs(ctx context.Context, st store.Store, inputs []ImportInput, o ImportOptions) error {
	w, errw, progress, f, asJSON, prices := o.Out, o.Err, o.Progress, o.Format, o.JSON, o.Prices
	results := make([]ImportResult, 0, len(inputs))
	failed := 0
	for _, input := range inputs {
		path := input.Name
		var r ImportResult
		if input.R != nil {
			r = importReader(ctx, st, path, input.R, f, prices)
		} else {
			r = importWithProgress(ctx, st, path, f, progress, prices)
		}
		results = append(results, r)
		for _, rr := range r.RefusedRecords {
			at := path
			if rr.Line > 0 {
				at += ":" + strconv.Itoa(rr.Line)
			}
			fmt.Fprintf(errw, "loupe: %s: record refused (trace %s seq %d type %q): %s\n", at, rr.TraceID, rr.Seq, rr.Type, rr.Error)
		}
		if n := r.Refused - len(r.RefusedRecords); n > 0 {
			fmt.Fprintf(errw, "loupe: %s: %d more records refused\n", path, n)
		}
		for _, warning := range r.Warnings {
			fmt.Fprintln(errw, "loupe: warning:", warning)
		}
		if r.Err != nil {
			failed++
			fmt.Fprintln(errw, "loupe:", r.Err)
		}
		if !asJSON {
			fmt.Fprintf(w, "%s: %s, %d records in %d traces (%d new", path, r.Format, r.Records, r.Traces, r.Added)
			if r.Refused > 0 {
				fmt.Fprintf(w, ", %d refused", r.Refused)
			}
			if r.Priced > 0 {
				fmt.Fprintf(w, ", %d model calls priced", r.Priced)
			}
			if r.Unpriced > 0 {
				fmt.Fprintf(w, ", %d of unknown cost (no price for the model)", r.Unpriced)
			}
			fmt.Fprintln(w, ")")
		}
	}
	if asJSON {
		if err := WriteJSON(w, results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed to import: %w", failed, len(inputs), ErrSome)
	}
	return nil
}

// ExportFile is Export to a file created (or truncated) at path; it
// reports what it wrote to errw.
func ExportFile(ctx context.Context, path string, errw io.Writer, st store.Store, f store.Filter) (int, error) {
	file, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := Export(ctx, file, st, f)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("exporting to %s: %w", path, err)
	}
	fmt.Fprintf(errw, "wrote %d records to %s\n", n, path)
	return n, nil
}

// Export writes the records of the traces matching f to w as Loupe JSON
// lines, streaming them from the store, and returns how many it wrote.
func Export(ctx context.Context, w io.Writer, st store.Store, f store.Filter) (int, error) {
	n := 0
	var readErr error
	recs := func(yield func(trace.Record) bool) {
		for r, err := range st.Export(ctx, f) {
			if err != nil {
				readErr = err
				return
			}
			if !yield(r) {
				return
			}
			n++ // yield returned true: the record was written
		}
	}
	if err := traceio.WriteJSONL(w, recs); err != nil {
		return n, err
	}
	return n, readErr
}

// PrunePreview returns what st.Prune(ctx, p) would remove now, without
// removing anything: the traces that started before p.Now-p.OlderThan or
// are not among the p.KeepNewest newest, oldest first, and their record
// count. It reads the whole trace list, page by page.
func PrunePreview(ctx context.Context, st store.Store, p store.PrunePolicy) (store.PruneResult, error) {
	var res store.PruneResult
	if p.OlderThan < 0 || p.KeepNewest < 0 {
		return res, fmt.Errorf("prune: OlderThan and KeepNewest must not be negative")
	}
	if p.OlderThan == 0 && p.KeepNewest == 0 {
		return res, nil
	}
	now := p.Now
	if now.IsZero() {
		now = time.Now()
	}
	cutoff := now.Add(-p.OlderThan)
	i := 0
	for s, err := range store.Summaries(ctx, st, store.ListQuery{Limit: 1000}) { // newest first
		if err != nil {
			return res, err
		}
		if (p.OlderThan > 0 && s.Started.Before(cutoff)) || (p.KeepNewest > 0 && i >= p.KeepNewest) {
			res.Traces = append(res.Traces, s.ID)
			res.Records += s.Records
		}
		i++
	}
	slices.Reverse(res.Traces)
	return res, nil
}

// PruneReport writes what Prune removed, or with dryRun what it would
// remove.
func PruneReport(w io.Writer, r store.PruneResult, dryRun bool) error {
	verb := "removed"
	if dryRun {
		verb = "would remove (dry run, nothing removed)"
	}
	_, err := fmt.Fprintf(w, "%s %d traces (%d records)\n", verb, len(r.Traces), r.Records)
	for _, id := range r.Traces {
		if err == nil {
			_, err = fmt.Fprintln(w, "  "+id.String())
		}
	}
	return err
}

// ErrSome reports that some of several inputs failed (the others were
// processed); the details were printed per input.
var ErrSome = errors.New("some inputs failed")
