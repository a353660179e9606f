// Package sqlstore is the part of Loupe's SQL backends that SQLite and
// PostgreSQL share: the summary tables kept up to date on append, and every
// query (list, search, get, export, delete, prune, aggregates), written once
// with a Dialect for the few differences. Every value from a caller reaches
// the database as a bind parameter; SQL text is built only from constants.
package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/loupe-dev/loupe/otlp"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Dialect is what differs between the SQL backends.
type Dialect struct {
	// Postgres selects $n placeholders and LEAST/GREATEST; otherwise ? and
	// SQLite's scalar min/max.
	Postgres bool
	// TextMatch returns a condition on records alias r that holds when the
	// record contains every term (each a space-separated token sequence
	// that must appear as a phrase), adding its arguments to b. plain[i]
	// is terms[i] with the diacritics it had (Terms folds them), for an
	// index whose older entries kept them.
	TextMatch func(b *Builder, terms, plain []string) string
	// TextFrom, if set, is used instead of TextMatch: it returns a FROM
	// clause joining a text index to records r, the match condition, and
	// the index's id column, which replaces r.id in ORDER BY and the
	// cursor so that the index drives the query and a page stops early.
	TextFrom func(b *Builder, terms []string) (from, cond, id string)
	// IDsFirst makes a search without text terms take two queries: the
	// first selects the matching rows' ids, times and trace names newest
	// first (which a backend's indexes can answer without reading the
	// rows: PostgreSQL's records_type_cover), the second the documents of
	// the rows of that batch alone. A search whose filters match few of
	// the records they scan then reads no document of those that fail.
	IDsFirst bool
	// DeleteText removes the text index entries of the given traces'
	// records before they are deleted (nil when the index goes with the
	// row).
	DeleteText func(ctx context.Context, tx *sql.Tx, b *Builder, idsCond string) error
}

// Sum returns the SQL aggregate of the integer column expr (tokens,
// nanoseconds, lost records) that cannot fail on overflow: SQLite's SUM
// fails with "integer overflow", so SQLite takes TOTAL (a float, exact up
// to 2^53); PostgreSQL's SUM of a bigint is a numeric, exact. Read the
// result with the Sum scanner, which stops it at math.MaxInt64.
func (d *Dialect) Sum(expr string) string {
	if d.Postgres {
		return "SUM(" + expr + ")"
	}
	return "TOTAL(" + expr + ")"
}

// CostExpr is the SQL of a cost column as Aggregate sums it: within 0 and
// 1e290, so that even 10^18 rows sum to a finite float (PostgreSQL fails
// a float sum that overflows), NaN (which only PostgreSQL stores, and
// compares as larger than any number) counting 0. Stores hold larger or
// negative costs only from before the ranges were checked.
func CostExpr(col string) string {
	return "CASE WHEN " + col + " = 'NaN' THEN 0 WHEN " + col + " > 1e290 THEN 1e290 WHEN " + col + " > 0 THEN " + col + " ELSE 0 END"
}

// Sum returns a sql.Scanner that stores a sum of tokens, nanoseconds or
// lost records in *dst, whatever number the database returns: an integer,
// a float (SQLite's TOTAL, or an integer column SQLite turned into a float
// on overflow) or a numeric's text (PostgreSQL's SUM). The result is
// within 0 and math.MaxInt64: a larger sum stops there, a negative one
// (stored before the ranges were checked) is 0, and NULL is 0.
func Sum(dst *int64) sql.Scanner { return sumScanner{dst} }

type sumScanner struct{ dst *int64 }

func (s sumScanner) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*s.dst = 0
	case int64:
		*s.dst = max(v, 0)
	case float64:
		*s.dst = floatCount(v)
	case []byte:
		return s.Scan(string(v))
	case string:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			*s.dst = max(n, 0)
			return nil
		}
		f, err := strconv.ParseFloat(v, 64) // out of range: ±Inf, with err
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("sum %q is not a number", v)
		}
		*s.dst = floatCount(f)
	default:
		return fmt.Errorf("sum of type %T is not a number", v)
	}
	return nil
}

// floatCount converts f to a count within 0 and math.MaxInt64; NaN is 0.
func floatCount(f float64) int64 {
	switch {
	case !(f > 0):
		return 0
	case f >= math.MaxInt64: // 2^63: the float nearest to MaxInt64
		return math.MaxInt64
	}
	return int64(f)
}

// Cost returns a sql.Scanner that stores a cost in *dst as a finite number
// not below 0: NaN and negative costs (stored before the ranges were
// checked) are 0, +Inf is math.MaxFloat64, and NULL is 0. JSON cannot hold
// NaN or infinities.
func Cost(dst *float64) sql.Scanner { return costScanner{dst} }

type costScanner struct{ dst *float64 }

func (s costScanner) Scan(v any) error {
	var f float64
	switch v := v.(type) {
	case nil:
	case float64:
		f = v
	case int64:
		f = float64(v)
	case []byte:
		return s.Scan(string(v))
	case string:
		var err error
		if f, err = strconv.ParseFloat(v, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("cost %q is not a number", v)
		}
	default:
		return fmt.Errorf("cost of type %T is not a number", v)
	}
	if !(f > 0) {
		f = 0
	}
	*s.dst = min(f, math.MaxFloat64)
	return nil
}

// addCount returns sum+n for n ≥ 0, stopping at math.MaxInt64.
func addCount(sum, n int64) int64 {
	if sum > math.MaxInt64-n {
		return math.MaxInt64
	}
	return sum + n
}

// Builder accumulates SQL arguments and hands out their placeholders.
type Builder struct {
	pg   bool
	Args []any
}

// NewBuilder returns a Builder for d.
func (d *Dialect) NewBuilder() *Builder { return &Builder{pg: d.Postgres} }

// Arg adds v and returns its placeholder.
func (b *Builder) Arg(v any) string {
	b.Args = append(b.Args, v)
	if b.pg {
		return "$" + strconv.Itoa(len(b.Args))
	}
	return "?"
}

// In returns "(p1, p2, …)" for ids.
func (b *Builder) In(ids []trace.TraceID) string {
	return b.List(len(ids), func(i int) any { return ids[i][:] })
}

// List returns "(p1, p2, …)", the placeholders of arg(0) to arg(n-1).
func (b *Builder) List(n int, arg func(i int) any) string {
	var s strings.Builder
	s.WriteByte('(')
	for i := range n {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(b.Arg(arg(i)))
	}
	s.WriteByte(')')
	return s.String()
}

// rowsIn returns a condition on records alias r that holds for the rows
// whose ids are ids (with times ts, at the same index). On PostgreSQL the
// times let it skip the day partitions that hold none of the rows; the
// ids and times are two arrays, so the condition also holds for an id
// paired with another row's time, which no row has (ids are unique).
func (b *Builder) rowsIn(ids, ts []int64) string {
	if b.pg {
		return "r.id = ANY(" + b.Arg(ids) + ") AND r.ts = ANY(" + b.Arg(ts) + ")"
	}
	return "r.id IN " + b.List(len(ids), func(i int) any { return ids[i] })
}

// DB implements store.Store over database/sql, except Append, which the
// backend supplies (it is where the backends differ most).
type DB struct {
	SQL      *sql.DB
	D        Dialect
	Name     string // path or redacted DSN, for messages
	ReadOnly error  // non-nil: writes fail with this (a newer schema)

	staleAfter atomic.Int64 // store.Options.StaleAfter, as set by SetOptions
}

// SetOptions implements store.Configurable.
func (db *DB) SetOptions(o store.Options) { db.staleAfter.Store(int64(o.StaleAfter)) }

// cutoff returns the last_time (Unix ns) below which a trace that has not
// ended is stale, as of now; math.MinInt64 when traces never go stale.
func (db *DB) cutoff() int64 {
	c, ok := store.Options{StaleAfter: time.Duration(db.staleAfter.Load())}.StaleCutoff(time.Now())
	if !ok {
		return math.MinInt64
	}
	return c.UnixNano()
}

// statusExpr is a trace's reported status over alias t: the stored status,
// except that a running trace last heard of before cutoff is incomplete.
func statusExpr(b *Builder, cutoff int64) string {
	return "CASE WHEN t.status = 'running' AND t.last_time < " + b.Arg(cutoff) + " THEN 'incomplete' ELSE t.status END"
}

// DurationExpr is a trace's duration in SQL over alias t: its root run's,
// or the time from its start to its last record. That difference is
// computed so that it cannot overflow (nanosecond times 1678 to 2261 are
// further apart than an int64 holds): it stops at math.MaxInt64, and is 0
// when the last record is not after the start. CASE arms are evaluated in
// order in both databases, unlike the operands of AND.
const DurationExpr = "COALESCE(t.run_duration, CASE WHEN t.last_time <= t.started THEN 0 " +
	"WHEN t.started >= 0 THEN t.last_time - t.started " +
	"WHEN t.last_time > 9223372036854775807 + t.started THEN 9223372036854775807 " +
	"ELSE t.last_time - t.started END)"

// Where returns the conditions (ANDed) selecting the traces (alias t) that f
// selects; cutoff is the stale cutoff of (*DB).cutoff, which tells
// store.StatusRunning from store.StatusIncomplete.
func Where(b *Builder, f *store.Filter, cutoff int64) []string {
	var c []string
	if len(f.IDs) > 0 {
		c = append(c, "t.trace_id IN "+b.In(f.IDs))
	}
	if f.IDPrefix != "" {
		// An invalid prefix matches nothing; callers validate with
		// store.PrefixRange to say why.
		lo, hi, err := store.PrefixRange(f.IDPrefix)
		if err != nil {
			c = append(c, "1 = 0")
		} else {
			c = append(c, "t.trace_id BETWEEN "+b.Arg(lo[:])+" AND "+b.Arg(hi[:]))
		}
	}
	if f.Name != "" {
		c = append(c, "t.name = "+b.Arg(f.Name))
	}
	switch f.Status {
	case "":
	case store.StatusRunning:
		c = append(c, "t.status = 'running' AND t.last_time >= "+b.Arg(cutoff))
	case store.StatusIncomplete:
		c = append(c, "t.status = 'running' AND t.last_time < "+b.Arg(cutoff))
	default:
		c = append(c, "t.status = "+b.Arg(f.Status))
	}
	if !f.Since.IsZero() {
		c = append(c, "t.started >= "+b.Arg(f.Since.UnixNano()))
	}
	if !f.Until.IsZero() {
		c = append(c, "t.started < "+b.Arg(f.Until.UnixNano()))
	}
	for _, tag := range f.Tags {
		c = append(c, "EXISTS (SELECT 1 FROM trace_tags g WHERE g.trace_id = t.trace_id AND g.tag = "+b.Arg(tag)+")")
	}
	for _, tag := range f.WithoutTags {
		c = append(c, "NOT EXISTS (SELECT 1 FROM trace_tags g WHERE g.trace_id = t.trace_id AND g.tag = "+b.Arg(tag)+")")
	}
	if f.Model != "" {
		c = append(c, "EXISTS (SELECT 1 FROM trace_models m WHERE m.trace_id = t.trace_id AND m.model = "+b.Arg(f.Model)+")")
	}
	if f.Tool != "" {
		c = append(c, "EXISTS (SELECT 1 FROM trace_tools o WHERE o.trace_id = t.trace_id AND o.tool = "+b.Arg(f.Tool)+")")
	}
	if f.MinDuration > 0 {
		c = append(c, DurationExpr+" >= "+b.Arg(int64(f.MinDuration)))
	}
	if f.MaxDuration > 0 {
		c = append(c, DurationExpr+" <= "+b.Arg(int64(f.MaxDuration)))
	}
	if f.HasErrors {
		c = append(c, "t.errors > 0")
	}
	// The "<> ''" terms, implied by the equality, let the databases use
	// the partial indexes on these columns, whose predicate they are: a
	// planner cannot tell that a bound parameter is not ''.
	if f.Session != "" {
		c = append(c, "t.session_id <> '' AND t.session_id = "+b.Arg(f.Session))
	}
	if f.User != "" {
		c = append(c, "t.user_id <> '' AND t.user_id = "+b.Arg(f.User))
	}

	c = append(c, scoreWhere(b, f.Scores)...)
	return c
}

func where(c []string) string {
	if len(c) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c, " AND ")
}

func limitOf(n int) int {
	switch {
	case n <= 0:
		return store.DefaultLimit
	case n > store.MaxLimit:
		return store.MaxLimit
	}
	return n
}

// cursor is a position in a newest-first listing: a time and a tie-breaker.
func encodeCursor(t int64, tie string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t, 10) + ":" + tie))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		ts, tie, ok := strings.Cut(string(b), ":")
		if ok {
			if t, err := strconv.ParseInt(ts, 10, 64); err == nil {
				return t, tie, nil
			}
		}
	}
	return 0, "", badCursor(c)
}

// badCursor is the *store.QueryError of a page cursor that is not one the
// store handed out.
func badCursor(c string) error {
	return &store.QueryError{Err: fmt.Errorf("invalid page cursor %q: pass the Next value of the previous page unchanged", c)}
}

// summaryCols are the columns scanSummary reads; their one argument (the
// stale cutoff) is added to b, so they must be built before any argument
// that follows them in the statement.
func summaryCols(b *Builder, cutoff int64) string {
	return "t.trace_id, t.name, t.started, " + DurationExpr + ", " + statusExpr(b, cutoff) +
		", t.records, t.iterations, t.model_calls, t.tool_calls, t.input_tokens, t.output_tokens, t.cost, t.unpriced, t.errors, t.lost, t.session_id, t.user_id"
}

func scanSummary(sc interface{ Scan(...any) error }) (store.Summary, error) {
	var s store.Summary
	var id []byte
	var started, dur int64
	if err := sc.Scan(&id, &s.Name, &started, Sum(&dur), &s.Status, &s.Records, &s.Iterations, &s.ModelCalls, &s.ToolCalls,
		Sum(&s.InputTokens), Sum(&s.OutputTokens), Cost(&s.CostUSD), &s.UnpricedCalls, &s.Errors, Sum(&s.Lost), &s.Session, &s.User); err != nil {
		return s, err
	}
	s.Incomplete = s.Lost > 0 || s.Status == store.StatusIncomplete
	copy(s.ID[:], id)
	s.Started = time.Unix(0, started).UTC()
	s.Duration = time.Duration(dur)
	return s, nil
}

// fillFacets sets the Tags, Models and Tools of sums.
func (db *DB) fillFacets(ctx context.Context, sums []store.Summary) error {
	if len(sums) == 0 {
		return nil
	}
	idx := make(map[trace.TraceID]int, len(sums))
	ids := make([]trace.TraceID, len(sums))
	for i := range sums {
		idx[sums[i].ID] = i
		ids[i] = sums[i].ID
	}
	for _, f := range []struct {
		table, col string
		dst        func(*store.Summary) *[]string
	}{
		{"trace_tags", "tag", func(s *store.Summary) *[]string { return &s.Tags }},
		{"trace_models", "model", func(s *store.Summary) *[]string { return &s.Models }},
		{"trace_tools", "tool", func(s *store.Summary) *[]string { return &s.Tools }},
	} {
		b := db.D.NewBuilder()
		rows, err := db.SQL.QueryContext(ctx, "SELECT trace_id, "+f.col+" FROM "+f.table+" WHERE trace_id IN "+b.In(ids)+" ORDER BY "+f.col, b.Args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id []byte
			var v string
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return err
			}
			if i, ok := idx[trace.TraceID(id)]; ok {
				p := f.dst(&sums[i])
				*p = append(*p, v)
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// List implements store.Store.
func (db *DB) List(ctx context.Context, q store.ListQuery) (store.ListPage, error) {
	if err := q.Validate(); err != nil {
		return store.ListPage{}, err
	}
	b := db.D.NewBuilder()
	cutoff := db.cutoff()
	cols := summaryCols(b, cutoff)
	c := Where(b, &q.Filter, cutoff)
	if q.Cursor != "" {
		t, tie, err := decodeCursor(q.Cursor)
		if err != nil {
			return store.ListPage{}, err
		}
		id, err := hex.DecodeString(tie)
		if err != nil || len(id) != 16 {
			return store.ListPage{}, &store.QueryError{Err: fmt.Errorf("invalid page cursor %q", q.Cursor)}
		}
		ta := b.Arg(t)
		c = append(c, "(t.started < "+ta+" OR (t.started = "+b.Arg(t)+" AND t.trace_id < "+b.Arg(id)+"))")
	}
	limit := limitOf(q.Limit)
	query := "SELECT " + cols + " FROM traces t" + where(c) +
		" ORDER BY t.started DESC, t.trace_id DESC LIMIT " + b.Arg(limit+1)
	if q.Cursor == "" && q.Offset > 0 {
		query += " OFFSET " + b.Arg(q.Offset)
	}
	rows, err := db.SQL.QueryContext(ctx, query, b.Args...)
	if err != nil {
		return store.ListPage{}, fmt.Errorf("list traces in %s: %w", db.Name, err)
	}
	var page store.ListPage
	for rows.Next() {
		s, err := scanSummary(rows)
		if err != nil {
			rows.Close()
			return store.ListPage{}, err
		}
		page.Traces = append(page.Traces, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.ListPage{}, err
	}
	if len(page.Traces) > limit {
		page.Traces = page.Traces[:limit]
		last := page.Traces[limit-1]
		page.Next = encodeCursor(last.Started.UnixNano(), last.ID.String())
	}
	return page, db.fillFacets(ctx, page.Traces)
}

// Trace implements store.Store.
func (db *DB) Trace(ctx context.Context, id trace.TraceID) (*store.Trace, error) {
	b := db.D.NewBuilder()
	cols := summaryCols(b, db.cutoff())
	row := db.SQL.QueryRowContext(ctx, "SELECT "+cols+" FROM traces t WHERE t.trace_id = "+b.Arg(id[:]), b.Args...)
	sum, err := scanSummary(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("trace %s: %w in %s", id, store.ErrNotFound, db.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("trace %s in %s: %w", id, db.Name, err)
	}
	sums := []store.Summary{sum}
	if err := db.fillFacets(ctx, sums); err != nil {
		return nil, err
	}
	var recs []trace.Record
	for r, err := range db.records(ctx, id) {
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return store.NewTrace(sums[0], recs), nil
}

// Records implements store.RecordPager.
func (db *DB) Records(ctx context.Context, id trace.TraceID, rr store.RecordRange) (store.RecordPage, error) {
	var page store.RecordPage
	if err := rr.Validate(); err != nil {
		return page, err
	}
	b := db.D.NewBuilder()
	q := "SELECT seq, doc FROM records WHERE trace_id = " + b.Arg(id[:])
	limit := rr.Limit
	if limit == 0 {
		limit = store.DefaultRecordPage
	}
	if rr.Seqs != nil {
		if len(rr.Seqs) == 0 {
			return page, db.exists(ctx, id)
		}
		in := make([]string, 0, len(rr.Seqs))
		for _, s := range rr.Seqs {
			if s <= math.MaxInt64 {
				in = append(in, b.Arg(int64(s)))
			}
		}
		if len(in) == 0 {
			return page, db.exists(ctx, id)
		}
		q += " AND seq IN (" + strings.Join(in, ", ") + ") ORDER BY seq"
	} else {
		after := min(rr.After, math.MaxInt64)
		q += " AND seq > " + b.Arg(int64(after)) + " ORDER BY seq"
		if rr.Span.IsZero() {
			// One more than the page, to know whether another follows.
			q += " LIMIT " + strconv.Itoa(limit+1)
		}
	}
	// A stored record's doc is its canonical encoding (trace.AppendJSON),
	// which names its span as below: rows of other spans are skipped
	// without decoding them.
	var spanKey []byte
	if !rr.Span.IsZero() {
		spanKey = fmt.Appendf(nil, `"span_id":"%s"`, rr.Span)
	}
	rows, err := db.SQL.QueryContext(ctx, q, b.Args...)
	if err != nil {
		return page, fmt.Errorf("read trace %s from %s: %w", id, db.Name, err)
	}
	defer rows.Close()
	var doc []byte
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq, &doc); err != nil {
			return page, err
		}
		if spanKey != nil && !bytes.Contains(doc, spanKey) {
			continue
		}
		if rr.Seqs == nil && len(page.Records) == limit {
			page.Next = page.Records[limit-1].Seq
			break
		}
		r, err := trace.DecodeRecord(doc)
		if err != nil {
			return page, fmt.Errorf("trace %s seq %d: stored record is corrupt: %w", id, seq, err)
		}
		if spanKey != nil && r.SpanID != rr.Span {
			continue // the text was inside a value
		}
		page.Records = append(page.Records, r)
	}
	if err := rows.Err(); err != nil {
		return page, err
	}
	if len(page.Records) == 0 {
		return page, db.exists(ctx, id)
	}
	return page, nil
}

// exists returns an error wrapping store.ErrNotFound if the store holds
// no trace id.
func (db *DB) exists(ctx context.Context, id trace.TraceID) error {
	b := db.D.NewBuilder()
	var one int
	err := db.SQL.QueryRowContext(ctx, "SELECT 1 FROM traces WHERE trace_id = "+b.Arg(id[:]), b.Args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("trace %s: %w in %s", id, store.ErrNotFound, db.Name)
	}
	if err != nil {
		return fmt.Errorf("trace %s in %s: %w", id, db.Name, err)
	}
	return nil
}

// records yields the records of one trace in seq order.
func (db *DB) records(ctx context.Context, id trace.TraceID) iter.Seq2[trace.Record, error] {
	return func(yield func(trace.Record, error) bool) {
		b := db.D.NewBuilder()
		rows, err := db.SQL.QueryContext(ctx, "SELECT seq, doc FROM records WHERE trace_id = "+b.Arg(id[:])+" ORDER BY seq", b.Args...)
		if err != nil {
			yield(trace.Record{}, fmt.Errorf("read trace %s from %s: %w", id, db.Name, err))
			return
		}
		defer rows.Close()
		var doc []byte
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq, &doc); err != nil {
				yield(trace.Record{}, err)
				return
			}
			r, err := trace.DecodeRecord(doc)
			if err != nil {
				yield(trace.Record{}, fmt.Errorf("trace %s seq %d: stored record is corrupt: %w", id, seq, err))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(trace.Record{}, err)
		}
	}
}

// Export implements store.Store: it pages through the matching traces,
// oldest first, and reads each trace's records by its primary key.
func (db *DB) Export(ctx context.Context, f store.Filter) iter.Seq2[trace.Record, error] {
	return func(yield func(trace.Record, error) bool) {
		if err := f.Validate(); err != nil {
			yield(trace.Record{}, err)
			return
		}
		const page = 500
		var after *struct {
			started int64
			id      []byte
		}
		for {
			b := db.D.NewBuilder()
			c := Where(b, &f, db.cutoff())
			if after != nil {
				c = append(c, "(t.started > "+b.Arg(after.started)+" OR (t.started = "+b.Arg(after.started)+" AND t.trace_id > "+b.Arg(after.id)+"))")
			}
			rows, err := db.SQL.QueryContext(ctx, "SELECT t.trace_id, t.started FROM traces t"+where(c)+" ORDER BY t.started, t.trace_id LIMIT "+b.Arg(page), b.Args...)
			if err != nil {
				yield(trace.Record{}, fmt.Errorf("export from %s: %w", db.Name, err))
				return
			}
			var ids []trace.TraceID
			var last int64
			for rows.Next() {
				var id []byte
				if err := rows.Scan(&id, &last); err != nil {
					rows.Close()
					yield(trace.Record{}, err)
					return
				}
				ids = append(ids, trace.TraceID(id))
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				yield(trace.Record{}, err)
				return
			}
			for _, id := range ids {
				for r, err := range db.records(ctx, id) {
					if !yield(r, err) || err != nil {
						return
					}
				}
			}
			if len(ids) < page {
				return
			}
			lastID := ids[len(ids)-1]
			after = &struct {
				started int64
				id      []byte
			}{last, lastID[:]}
		}
	}
}

// Terms turns a query's words and phrases into normalized token sequences
// (lowercase letters and digits, space-separated), dropping those with no
// token. ok is false when q has text but none of it is searchable.
func Terms(q *store.Query) (terms []string, ok bool) {
	terms, _, ok = termsOf(q)
	return terms, ok
}

// termsOf returns Terms, and beside each term the same tokens with their
// diacritics (equal to the term when it had none).
func termsOf(q *store.Query) (terms, plain []string, ok bool) {
	for _, w := range append(slices.Clone(q.Phrases), q.Words...) {
		if t := strings.Join(Tokens(w), " "); t != "" {
			terms = append(terms, t)
			plain = append(plain, strings.Join(strings.FieldsFunc(strings.ToLower(w), notTokenRune), " "))
		}
	}
	return terms, plain, len(terms) > 0 || !q.HasText()
}

// Tokens splits s into lowercase runs of letters and digits, Latin
// letters without their diacritics (é is e), as the text indexes do.
func Tokens(s string) []string {
	return strings.FieldsFunc(foldLower(s), notTokenRune)
}

func notTokenRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// TokenText returns s's Tokens separated by single spaces: the text to
// hand a text index whose own parser splits words differently (PostgreSQL's
// reads "cust-4711" as "cust" and "-4711", and "api.example.com" as one
// host name) or keeps diacritics, so that it indexes the tokens a query
// is split into.
func TokenText(s string) string {
	return strings.Join(Tokens(s), " ")
}

// foldLower returns s in lower case, its Latin letters without their
// diacritics, as SQLite's FTS5 unicode61 tokenizer reads text (its
// default remove_diacritics=1): Café and CAFE are both cafe; ø, ł and ß,
// which are letters of their own, stay.
func foldLower(s string) string {
	s = strings.ToLower(s)
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Map(foldRune, s)
		}
	}
	return s
}

// foldRune returns r without its diacritic when r is a Latin letter
// with one.
func foldRune(r rune) rune {
	if b, ok := latinFold()[r]; ok {
		return b
	}
	return r
}

// latinFold maps each precomposed Latin letter with diacritics (Latin-1
// Supplement, Latin Extended-A and -B, Latin Extended Additional) to its
// base letter: those whose canonical decomposition is an ASCII letter
// followed by nonspacing marks.
var latinFold = sync.OnceValue(func() map[rune]rune {
	m := map[rune]rune{}
	for _, rg := range [][2]rune{{0xC0, 0x24F}, {0x1E00, 0x1EFF}} {
		for r := rg[0]; r <= rg[1]; r++ {
			d := []rune(norm.NFD.String(string(r)))
			if len(d) < 2 || d[0] >= utf8.RuneSelf || !unicode.IsLetter(d[0]) {
				continue
			}
			marks := true
			for _, c := range d[1:] {
				marks = marks && unicode.Is(unicode.Mn, c)
			}
			if marks {
				m[r] = d[0]
			}
		}
	}
	return m
})

// Search implements store.Store.
func (db *DB) Search(ctx context.Context, q store.Query) (store.SearchPage, error) {
	if err := q.Validate(); err != nil {
		return store.SearchPage{}, err
	}
	terms, plain, ok := termsOf(&q)
	if !ok {
		return store.SearchPage{}, nil
	}
	b := db.D.NewBuilder()
	from, idCol := "records r", "r.id"
	var c []string
	if len(terms) > 0 {
		if db.D.TextFrom != nil {
			var cond string
			from, cond, idCol = db.D.TextFrom(b, terms)
			c = append(c, cond)
		} else {
			c = append(c, db.D.TextMatch(b, terms, plain))
		}
	}
	c = append(c, Where(b, &q.Filter, db.cutoff())...)
	if !q.Since.IsZero() {
		// Every record of a trace that started at or after Since is
		// itself no older (a trace's start is its records' earliest):
		// saying so lets PostgreSQL skip the day partitions before it.
		c = append(c, "r.ts >= "+b.Arg(q.Since.UnixNano()))
	}
	if len(q.Types) > 0 {
		c = append(c, "r.type IN "+b.List(len(q.Types), func(i int) any { return string(q.Types[i]) }))
	}
	var after int64 = -1 // scan rows with ids below this; -1: from the newest
	if q.Cursor != "" {
		_, tie, err := decodeCursor(q.Cursor)
		rid, perr := strconv.ParseInt(tie, 10, 64)
		if err != nil || perr != nil {
			return store.SearchPage{}, badCursor(q.Cursor)
		}
		after = rid
	}
	limit := limitOf(q.Limit)
	match := RecordMatch(&q)
	// Without a record filter every row is a hit: one query of limit+1
	// rows fills the page and tells whether there is a next one. With one,
	// rows are scanned in batches until the page is full or they run out.
	batch := limit + 1
	if match != nil {
		batch = max(batch, 256)
	}
	// Without text, the rows are chosen first (ids, times and trace
	// names, which an index can hold) and the documents of the chosen
	// rows alone are read after (see Dialect.IDsFirst).
	idsFirst := db.D.IDsFirst && len(terms) == 0
	var page store.SearchPage
	var lastHit int64
	// take adds the row id of the trace named name, stored as doc, to
	// page if it is a hit, and says whether the page was full before.
	take := func(id int64, name string, doc []byte) (full bool, err error) {
		if match == nil && len(page.Hits) == limit {
			// Every row is a hit: this one starts the next page, and
			// its document is not needed (searchIDsFirst passes nil).
			page.Next = encodeCursor(0, strconv.FormatInt(lastHit, 10))
			return true, nil
		}
		r, err := trace.DecodeRecord(doc)
		if err != nil {
			return false, fmt.Errorf("search %s: stored record %d is corrupt: %w", db.Name, id, err)
		}
		if match != nil && !match(&r) {
			return false, nil
		}
		if len(page.Hits) == limit {
			page.Next = encodeCursor(0, strconv.FormatInt(lastHit, 10))
			return true, nil
		}
		h := store.Hit{TraceName: name, TraceID: r.TraceID, Seq: r.Seq, Time: r.Time, Type: r.Type, Name: r.Name}
		if len(terms) > 0 {
			h.Field, h.Snippet = Snippet(&r, terms)
		}
		page.Hits = append(page.Hits, h)
		lastHit = id
		return false, nil
	}
	for {
		bb := *b
		bb.Args = slices.Clone(b.Args)
		cc := slices.Clone(c)
		if after >= 0 {
			cc = append(cc, idCol+" < "+bb.Arg(after))
		}
		cols := "r.id, t.name, r.doc"
		if idsFirst {
			cols = "r.id, r.ts, t.name"
		}
		query := "SELECT " + cols + " FROM " + from + " JOIN traces t ON t.trace_id = r.trace_id" + where(cc) +
			" ORDER BY " + idCol + " DESC LIMIT " + bb.Arg(batch)
		var (
			n, last int64
			full    bool
			err     error
		)
		if idsFirst {
			n, last, full, err = db.searchIDsFirst(ctx, query, bb.Args, match == nil, limit, take)
		} else {
			n, last, full, err = db.searchRows(ctx, query, bb.Args, take)
		}
		if err != nil {
			return store.SearchPage{}, err
		}
		if n > 0 {
			after = last
		}
		if full || n < int64(batch) {
			return page, nil
		}
	}
}

// searchTake is the step of Search that adds the row id of the trace
// named name, stored as doc, to the page if it is a hit; full says the
// page was already full, and the search is over.
type searchTake func(id int64, name string, doc []byte) (full bool, err error)

// searchRows runs query, which selects the id, trace name and document of
// a batch of rows newest first, and hands them to take until it says the
// page is full. It returns the number of rows read and the last one's id.
func (db *DB) searchRows(ctx context.Context, query string, args []any, take searchTake) (n, last int64, full bool, err error) {
	rows, err := db.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, 0, false, fmt.Errorf("search %s: %w", db.Name, err)
	}
	defer rows.Close()
	var name string
	var doc []byte
	for rows.Next() {
		if err := rows.Scan(&last, &name, &doc); err != nil {
			return 0, 0, false, fmt.Errorf("search %s: %w", db.Name, err)
		}
		n++
		if full, err = take(last, name, doc); err != nil || full {
			return n, last, full, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, false, fmt.Errorf("search %s: %w", db.Name, err)
	}
	return n, last, false, nil
}

// searchIDsFirst runs query, which selects the id, time and trace name of
// a batch of rows newest first, then reads the documents of those rows
// with a second query and hands the rows to take in the same order until
// it says the page is full. When allHits (every row is a hit, so the
// batch is the page and one row more), the document of the row past the
// page is not read. A row deleted between the two queries is left out,
// as if the first had not seen it. It returns the number of rows the
// first query read and the last one's id.
func (db *DB) searchIDsFirst(ctx context.Context, query string, args []any, allHits bool, limit int, take searchTake) (n, last int64, full bool, err error) {
	var batch []searchRow
	err = func() error {
		rows, err := db.SQL.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r searchRow
			if err := rows.Scan(&r.id, &r.ts, &r.name); err != nil {
				return err
			}
			batch = append(batch, r)
		}
		return rows.Err()
	}()
	if err != nil {
		return 0, 0, false, fmt.Errorf("search %s: %w", db.Name, err)
	}
	if len(batch) == 0 {
		return 0, 0, false, nil
	}
	n, last = int64(len(batch)), batch[len(batch)-1].id
	need := batch
	if allHits && len(need) > limit {
		need = need[:limit]
	}
	missing, full, err := db.searchDocs(ctx, need, take)
	if err != nil || full || len(need) == len(batch) {
		return n, last, full, err
	}
	if missing == 0 {
		// The page is full: the next row is the next page's first hit.
		full, err = take(batch[len(need)].id, batch[len(need)].name, nil)
		return n, last, full, err
	}
	// Rows of the page were deleted: the rest may fill it.
	_, full, err = db.searchDocs(ctx, batch[len(need):], take)
	return n, last, full, err
}

// searchRow is a row searchIDsFirst chose: its id, time and trace name.
type searchRow struct {
	id, ts int64
	name   string
}

// searchDocs reads the documents of rows (newest first) and hands each
// row to take in that order until it says the page is full. It returns
// how many rows it did not find (deleted since they were chosen).
func (db *DB) searchDocs(ctx context.Context, rows []searchRow, take searchTake) (missing int, full bool, err error) {
	ids, times := make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		ids[i], times[i] = r.id, r.ts
	}
	b := db.D.NewBuilder()
	res, err := db.SQL.QueryContext(ctx, "SELECT r.id, r.doc FROM records r WHERE "+b.rowsIn(ids, times)+" ORDER BY r.id DESC", b.Args...)
	if err != nil {
		return 0, false, fmt.Errorf("search %s: %w", db.Name, err)
	}
	defer res.Close()
	i := 0 // the next of rows; the documents come in their order
	var doc []byte
	for res.Next() {
		var id int64
		if err := res.Scan(&id, &doc); err != nil {
			return 0, false, fmt.Errorf("search %s: %w", db.Name, err)
		}
		for i < len(rows) && rows[i].id > id {
			i++ // deleted since it was chosen
			missing++
		}
		if i == len(rows) || rows[i].id != id {
			continue // not asked for (rowsIn may select more)
		}
		if full, err = take(id, rows[i].name, doc); err != nil || full {
			return missing, full, err
		}
		i++
	}
	if err := res.Err(); err != nil {
		return 0, false, fmt.Errorf("search %s: %w", db.Name, err)
	}
	return missing + len(rows) - i, false, nil
}

// RecordMatch returns the test a record of a matching trace must pass to
// be a search hit, from the filters of q that name a kind of record:
// model:X keeps the calls of model X, tool:X the records of tool X (both
// given: either), and has:errors the records that carry or are an error
// (and with model: or tool:, the failed ones among those). It returns nil
// when q has no such filter, or when q names record types (type:), which
// then say which records to show (matched in SQL) while model:, tool: and
// has:errors only select the traces: "has:errors type:run.start" lists the
// starts of the runs with errors. The trace-level conditions (Where) apply
// either way.
func RecordMatch(q *store.Query) func(*trace.Record) bool {
	model, tool, errs := q.Model, q.Tool, q.HasErrors
	if len(q.Types) > 0 || model == "" && tool == "" && !errs {
		return nil
	}
	return func(r *trace.Record) bool {
		if model != "" || tool != "" {
			isModel := model != "" && (r.Type == trace.TypeModelCall || r.Type == trace.TypeModelDelta) && r.Name == model
			isTool := tool != "" && strings.HasPrefix(string(r.Type), "tool.") && r.Name == tool
			if !isModel && !isTool {
				return false
			}
		}
		return !errs || r.Failed()
	}
}

// TextFields returns the searchable text of r by field name, in the order
// Snippet looks at them. An OTLP span's companion record is searched by
// its span's name and attribute values alone, as its output
// (otlp.SpanText).
func TextFields(r *trace.Record) [5]struct{ Field, Text string } {
	if text, ok := otlp.SpanText(r); ok {
		return [5]struct{ Field, Text string }{{"name", ""}, {"error", r.Error}, {"input", ""}, {"output", text}, {"thinking", ""}}
	}
	return [5]struct{ Field, Text string }{
		{"name", r.Name}, {"error", r.Error}, {"input", valueText(r.Input)}, {"output", valueText(r.Output)}, {"thinking", valueText(r.Thinking)},
	}
}

// Body is the text of r that the text indexes hold: its non-empty
// TextFields, one per line.
func Body(r *trace.Record) string {
	var b strings.Builder
	for _, f := range TextFields(r) {
		if f.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(f.Text)
		}
	}
	return b.String()
}

func valueText(v trace.Value) string {
	if len(v) == 0 {
		return ""
	}
	return v.Text()
}

// Snippet finds the first field of r that contains the first token of any
// term and returns it with up to 60 bytes of context either side.
func Snippet(r *trace.Record, terms []string) (field, snippet string) {
	for _, f := range TextFields(r) {
		if f.Text == "" {
			continue
		}
		low := foldLower(f.Text)
		for _, t := range terms {
			tok, _, _ := strings.Cut(t, " ")
			i := strings.Index(low, tok)
			if i < 0 || len(low) != len(f.Text) {
				if i < 0 {
					continue
				}
				// Lowercasing or folding changed byte offsets: fall back
				// to the start.
				i = 0
			}
			from, to := max(0, i-60), min(len(f.Text), i+len(t)+60)
			for from > 0 && !utf8.RuneStart(f.Text[from]) {
				from--
			}
			for to < len(f.Text) && !utf8.RuneStart(f.Text[to]) {
				to++
			}
			s := f.Text[from:to]
			if from > 0 {
				s = "…" + s
			}
			if to < len(f.Text) {
				s += "…"
			}
			return f.Field, s
		}
	}
	return "", ""
}

// Aggregate implements store.Store. Its sums of tokens, durations and
// lost records are taken with Dialect.Sum and read with Sum, so they stop
// at math.MaxInt64 rather than fail; costs are summed with CostExpr.
func (db *DB) Aggregate(ctx context.Context, since, until time.Time) (store.Aggregates, error) {
	cutoff := db.cutoff()
	f := store.Filter{Since: since, Until: until}
	// The totals have an argument before the range's, so they get their
	// own builder (SQLite's ? placeholders are positional).
	tb := db.D.NewBuilder()
	totals := "SELECT COUNT(*), CAST(COALESCE(SUM(t.records), 0) AS BIGINT), " +
		"CAST(COALESCE(SUM(CASE WHEN t.errors > 0 OR t.status NOT IN ('success', 'running') THEN 1 ELSE 0 END), 0) AS BIGINT), " +
		"CAST(COALESCE(SUM(CASE WHEN t.lost > 0 OR (t.status = 'running' AND t.last_time < " + tb.Arg(cutoff) + ") THEN 1 ELSE 0 END), 0) AS BIGINT), " +
		db.D.Sum("t.lost") + " FROM traces t"
	totals += where(Where(tb, &f, cutoff))
	b := db.D.NewBuilder()
	w := where(Where(b, &f, cutoff))
	a := store.Aggregates{ByModel: map[string]trace.ModelStats{}, ByTool: map[string]store.ToolAggregate{}}
	row := db.SQL.QueryRowContext(ctx, totals, tb.Args...)
	if err := row.Scan(&a.Traces, &a.Records, &a.ErrorTraces, &a.Incomplete, Sum(&a.Lost)); err != nil {
		return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
	}
	if a.Traces > 0 {
		a.ErrorRate = float64(a.ErrorTraces) / float64(a.Traces)
	}
	rows, err := db.SQL.QueryContext(ctx, "SELECT m.model, CAST(SUM(m.calls) AS BIGINT), CAST(SUM(m.errors) AS BIGINT), "+
		db.D.Sum("m.input_tokens")+", "+db.D.Sum("m.output_tokens")+", "+db.D.Sum("m.cached_tokens")+", "+db.D.Sum("m.reasoning_tokens")+", "+
		"SUM("+CostExpr("m.cost")+"), CAST(SUM(m.unpriced) AS BIGINT) "+
		"FROM trace_models m JOIN traces t ON t.trace_id = m.trace_id"+w+" GROUP BY m.model", b.Args...)
	if err != nil {
		return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
	}
	for rows.Next() {
		var name string
		var m trace.ModelStats
		if err := rows.Scan(&name, &m.Calls, &m.Errors, Sum(&m.InputTokens), Sum(&m.OutputTokens), Sum(&m.CachedTokens), Sum(&m.ReasoningTokens),
			Cost(&m.CostUSD), &m.UnpricedCalls); err != nil {
			rows.Close()
			return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
		}
		a.ByModel[name] = m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
	}
	rows, err = db.SQL.QueryContext(ctx, "SELECT o.tool, CAST(SUM(o.calls) AS BIGINT), CAST(SUM(o.errors) AS BIGINT), "+db.D.Sum("o.total_ns")+" "+
		"FROM trace_tools o JOIN traces t ON t.trace_id = o.trace_id"+w+" GROUP BY o.tool", b.Args...)
	if err != nil {
		return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t store.ToolAggregate
		var total int64
		if err := rows.Scan(&name, &t.Calls, &t.Errors, Sum(&total)); err != nil {
			return a, fmt.Errorf("aggregate %s: %w", db.Name, err)
		}
		t.Total = time.Duration(total)
		a.ByTool[name] = t
	}
	return a, rows.Err()
}

// Delete implements store.Store.
func (db *DB) Delete(ctx context.Context, ids ...trace.TraceID) (int, error) {
	if db.ReadOnly != nil {
		return 0, db.ReadOnly
	}
	n, _, err := db.deleteIDs(ctx, ids)
	return n, err
}

// deleteIDs removes traces in chunks, each in a transaction, and returns
// how many traces and records it removed.
func (db *DB) deleteIDs(ctx context.Context, ids []trace.TraceID) (traces, records int, err error) {
	for chunk := range slices.Chunk(ids, 500) {
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return traces, records, err
		}
		nt, nr, err := db.deleteChunk(ctx, tx, chunk)
		if err != nil {
			tx.Rollback()
			return traces, records, fmt.Errorf("delete traces from %s: %w", db.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return traces, records, fmt.Errorf("delete traces from %s: %w", db.Name, err)
		}
		traces += nt
		records += nr
	}
	return traces, records, nil
}

func (db *DB) deleteChunk(ctx context.Context, tx *sql.Tx, ids []trace.TraceID) (int, int, error) {
	b := db.D.NewBuilder()
	in := b.In(ids)
	if db.D.DeleteText != nil {
		if err := db.D.DeleteText(ctx, tx, b, "trace_id IN "+in); err != nil {
			return 0, 0, err
		}
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM records WHERE trace_id IN "+in, b.Args...)
	if err != nil {
		return 0, 0, err
	}
	nr, _ := res.RowsAffected()
	for _, table := range []string{"trace_tags", "trace_models", "trace_tools", "scores"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE trace_id IN "+in, b.Args...); err != nil {
			return 0, 0, err
		}
	}
	res, err = tx.ExecContext(ctx, "DELETE FROM traces WHERE trace_id IN "+in, b.Args...)
	if err != nil {
		return 0, 0, err
	}
	nt, _ := res.RowsAffected()
	return int(nt), int(nr), nil
}

// Prune implements store.Store.
func (db *DB) Prune(ctx context.Context, p store.PrunePolicy) (store.PruneResult, error) {
	var res store.PruneResult
	if db.ReadOnly != nil {
		return res, db.ReadOnly
	}
	if p.OlderThan < 0 || p.KeepNewest < 0 || p.Limit < 0 {
		return res, fmt.Errorf("prune: OlderThan, KeepNewest and Limit must not be negative")
	}
	var conds []string
	b := db.D.NewBuilder()
	if p.OlderThan > 0 {
		now := p.Now
		if now.IsZero() {
			now = time.Now()
		}
		conds = append(conds, "t.started < "+b.Arg(now.Add(-p.OlderThan).UnixNano()))
	}
	if p.KeepNewest > 0 {
		// Traces not among the newest KeepNewest.
		conds = append(conds, "t.trace_id NOT IN (SELECT k.trace_id FROM traces k ORDER BY k.started DESC, k.trace_id DESC LIMIT "+b.Arg(p.KeepNewest)+")")
	}
	if len(conds) == 0 {
		return res, nil
	}
	q := "SELECT t.trace_id FROM traces t WHERE " + strings.Join(conds, " OR ") + " ORDER BY t.started, t.trace_id"
	if p.Limit > 0 {
		q += " LIMIT " + b.Arg(p.Limit)
	}
	rows, err := db.SQL.QueryContext(ctx, q, b.Args...)
	if err != nil {
		return res, fmt.Errorf("prune %s: %w", db.Name, err)
	}
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return res, err
		}
		res.Traces = append(res.Traces, trace.TraceID(id))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, err
	}
	_, res.Records, err = db.deleteIDs(ctx, res.Traces)
	return res, err
}

// Close implements store.Store.
func (db *DB) Close() error { return db.SQL.Close() }

// TraceDelta is what one Append adds to a trace's summary rows.
type TraceDelta struct {
	ID      trace.TraceID
	Name    string // root run.start's name, if in the batch
	Started int64
	Last    int64
	RunDur  sql.NullInt64 // root run.end's duration, if in the batch
	Status  string        // root run.end's status, if in the batch
	Lost    int64         // records lost, summed over trace.TypeDropped markers (store.LostCount)
	Stats   trace.Stats
	Tags    []string
	Session string // the session of the new record of lowest seq that has one
	User    string // the user of the new record of lowest seq that has one

	sessionSeq, userSeq uint64 // the seqs of the records Session and User came from
}

// Deltas folds the newly stored records into per-trace deltas, sorted by
// trace id (so concurrent writers lock rows in the same order).
func Deltas(added []*trace.Record) []*TraceDelta {
	m := map[trace.TraceID]*TraceDelta{}
	var out []*TraceDelta
	for _, r := range added {
		d := m[r.TraceID]
		start, t := r.Start().UnixNano(), r.Time.UnixNano()
		if d == nil {
			d = &TraceDelta{ID: r.TraceID, Started: start, Last: t}
			m[r.TraceID] = d
			out = append(out, d)
		}
		d.Started, d.Last = min(d.Started, start), max(d.Last, t)
		d.Stats.Add(r)
		d.Lost = addCount(d.Lost, store.LostCount(r))
		// The batch's order differs between backends (PostgreSQL sorts
		// it): seq decides which record is first.
		if s := r.Session(); s != "" && (d.Session == "" || r.Seq < d.sessionSeq) {
			d.Session, d.sessionSeq = s, r.Seq
		}
		if u := r.User(); u != "" && (d.User == "" || r.Seq < d.userSeq) {
			d.User, d.userSeq = u, r.Seq
		}
		if r.Depth == 0 {
			switch r.Type {
			case trace.TypeRunStart:
				d.Name = r.Name
				d.Tags = append(d.Tags, r.Tags()...)
			case trace.TypeRunEnd:
				d.RunDur = sql.NullInt64{Int64: int64(r.Duration), Valid: true}
				d.Status = r.Status
				if d.Status == "" {
					d.Status = string(trace.TerminationSuccess)
					if r.Error != "" {
						d.Status = string(trace.TerminationError)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b *TraceDelta) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// satAdd is the SQL of alias.col + excluded.col for a column of sums of
// tokens, durations or lost records, stopping at math.MaxInt64 instead of
// overflowing (which PostgreSQL refuses and SQLite turns into a float).
// The deltas are never negative (trace.Stats.Add, store.LostCount), so
// the subtraction cannot overflow.
func satAdd(alias, col string) string {
	return "CASE WHEN " + alias + "." + col + " > 9223372036854775807 - excluded." + col + " THEN 9223372036854775807 ELSE " +
		alias + "." + col + " + excluded." + col + " END"
}

// satAddCost is the SQL of alias.cost + excluded.cost. The deltas are at
// most store.MaxCostUSD a record, so only a sum already past 1e300 (stored
// before the ranges were checked) could overflow, which PostgreSQL
// refuses: such a sum is kept as it is.
func satAddCost(alias string) string {
	return "CASE WHEN " + alias + ".cost > 1e300 THEN " + alias + ".cost ELSE " + alias + ".cost + excluded.cost END"
}

// Execer runs a statement; both *sql.Tx and a pgx transaction adapt to it.
type Execer func(ctx context.Context, query string, args ...any) error

// ApplyDeltas upserts the summary rows for ds with exec. The sums of
// tokens, durations and lost records stop at math.MaxInt64 (satAdd), in
// the rows and in the deltas (trace.Stats.Add), so that no append fails
// or leaves a sum that does not read back.
func (d *Dialect) ApplyDeltas(ctx context.Context, exec Execer, ds []*TraceDelta) error {
	least, greatest := "min", "max"
	if d.Postgres {
		least, greatest = "LEAST", "GREATEST"
	}
	traceSQL := "INSERT INTO traces AS t (trace_id, name, started, last_time, run_duration, status, records, iterations, model_calls, tool_calls, " +
		"input_tokens, output_tokens, cost, unpriced, errors, lost, session_id, user_id) VALUES %s ON CONFLICT (trace_id) DO UPDATE SET " +
		// A trace's session and user are the first stored: a later batch
		// fills them only while they are empty.
		"session_id = CASE WHEN t.session_id = '' THEN excluded.session_id ELSE t.session_id END, " +
		"user_id = CASE WHEN t.user_id = '' THEN excluded.user_id ELSE t.user_id END, " +
		"name = CASE WHEN excluded.name <> '' THEN excluded.name ELSE t.name END, " +
		"started = " + least + "(t.started, excluded.started), last_time = " + greatest + "(t.last_time, excluded.last_time), " +
		"run_duration = COALESCE(excluded.run_duration, t.run_duration), " +
		"status = CASE WHEN excluded.status <> 'running' THEN excluded.status ELSE t.status END, " +
		"records = t.records + excluded.records, iterations = t.iterations + excluded.iterations, " +
		"model_calls = t.model_calls + excluded.model_calls, tool_calls = t.tool_calls + excluded.tool_calls, " +
		"input_tokens = " + satAdd("t", "input_tokens") + ", output_tokens = " + satAdd("t", "output_tokens") + ", " +
		"cost = " + satAddCost("t") + ", unpriced = t.unpriced + excluded.unpriced, errors = t.errors + excluded.errors, lost = " + satAdd("t", "lost")
	modelSQL := "INSERT INTO trace_models AS m (trace_id, model, calls, errors, input_tokens, output_tokens, cached_tokens, reasoning_tokens, cost, unpriced) " +
		"VALUES %s ON CONFLICT (trace_id, model) DO UPDATE SET calls = m.calls + excluded.calls, errors = m.errors + excluded.errors, " +
		"input_tokens = " + satAdd("m", "input_tokens") + ", output_tokens = " + satAdd("m", "output_tokens") + ", " +
		"cached_tokens = " + satAdd("m", "cached_tokens") + ", reasoning_tokens = " + satAdd("m", "reasoning_tokens") + ", cost = " + satAddCost("m") + ", " +
		"unpriced = m.unpriced + excluded.unpriced"
	toolSQL := "INSERT INTO trace_tools AS o (trace_id, tool, calls, errors, total_ns) VALUES %s ON CONFLICT (trace_id, tool) DO UPDATE SET " +
		"calls = o.calls + excluded.calls, errors = o.errors + excluded.errors, total_ns = " + satAdd("o", "total_ns")
	tagSQL := "INSERT INTO trace_tags (trace_id, tag) VALUES %s ON CONFLICT DO NOTHING"
	// Each table gets multi-row upserts: one statement per summary row
	// made the summaries a sixth of ingest. A trace, (trace, model),
	// (trace, tool) or (trace, tag) occurs once in ds, so no statement
	// touches a row twice (which PostgreSQL refuses).
	var traces, models, tools, tags rowSet
	traces.cols, models.cols, tools.cols, tags.cols = 18, 10, 5, 2
	for _, t := range ds {
		s := &t.Stats
		status := t.Status
		if status == "" {
			status = store.StatusRunning
		}
		var runDur any
		if t.RunDur.Valid {
			runDur = t.RunDur.Int64
		}
		traces.add(t.ID[:], t.Name, t.Started, t.Last, runDur, status, s.Records, s.Iterations, s.ModelCalls, s.ToolCalls,
			s.InputTokens, s.OutputTokens, s.CostUSD, s.UnpricedCalls, s.Errors, t.Lost, t.Session, t.User)
		for _, name := range slices.Sorted(maps.Keys(s.ByModel)) {
			m := s.ByModel[name]
			models.add(t.ID[:], name, m.Calls, m.Errors, m.InputTokens, m.OutputTokens, m.CachedTokens, m.ReasoningTokens, m.CostUSD, m.UnpricedCalls)
		}
		for _, name := range slices.Sorted(maps.Keys(s.ByTool)) {
			o := s.ByTool[name]
			tools.add(t.ID[:], name, o.Calls, o.Errors, int64(o.Total))
		}
		slices.Sort(t.Tags)
		for _, tag := range slices.Compact(t.Tags) {
			tags.add(t.ID[:], tag)
		}
	}
	for _, u := range []struct {
		what string
		tmpl string
		rows *rowSet
	}{{"traces", traceSQL, &traces}, {"models", modelSQL, &models}, {"tools", toolSQL, &tools}, {"tags", tagSQL, &tags}} {
		if err := u.rows.exec(ctx, d, exec, u.tmpl); err != nil {
			return fmt.Errorf("update trace summaries (%s): %w", u.what, err)
		}
	}
	return nil
}

// rowSet collects the values of a multi-row statement, cols per row.
type rowSet struct {
	cols int
	vals []any
}

func (r *rowSet) add(vals ...any) { r.vals = append(r.vals, vals...) }

// maxRows is the most rows one upsert carries. Statements carry maxRows
// rows, then a power of two each, so a backend caching prepared statements
// by text sees at most 7 texts per table.
const maxRows = 64

// exec runs tmpl (with one %s for the VALUES groups) over the collected rows.
func (r *rowSet) exec(ctx context.Context, d *Dialect, exec Execer, tmpl string) error {
	vals := r.vals
	for len(vals) > 0 {
		n := len(vals) / r.cols
		if n > maxRows {
			n = maxRows
		} else {
			n = 1 << (bits.Len(uint(n)) - 1) // the largest power of two ≤ n
		}
		b := d.NewBuilder()
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('(')
			for j := range r.cols {
				if j > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString(b.Arg(vals[i*r.cols+j]))
			}
			sb.WriteByte(')')
		}
		if err := exec(ctx, fmt.Sprintf(tmpl, sb.String()), b.Args...); err != nil {
			return err
		}
		vals = vals[n*r.cols:]
	}
	return nil
}

// Validate checks a batch before it is stored.
func Validate(recs []trace.Record) error {
	for i := range recs {
		if err := store.ValidateRecord(i, &recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Sessions implements store.SessionLister over the traces table's
// session_id and user_id columns.
func (db *DB) Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	if err := q.Validate(); err != nil {
		return store.SessionPage{}, err
	}
	// Two steps in one statement: the page of sessions, found from the
	// (session_id, started) index alone when only time bounds the runs
	// (no table row is read to order them); then the totals of those
	// sessions only, through the same index.
	b := db.D.NewBuilder()
	conds := func() []string {
		c := []string{"t.session_id <> ''"}
		if q.User != "" {
			c = append(c, "t.user_id <> '' AND t.user_id = "+b.Arg(q.User))
		}
		if !q.Since.IsZero() {
			c = append(c, "t.started >= "+b.Arg(q.Since.UnixNano()))
		}
		if !q.Until.IsZero() {
			c = append(c, "t.started < "+b.Arg(q.Until.UnixNano()))
		}
		return c
	}
	pageSQL := "SELECT t.session_id AS sid, MAX(t.started) AS latest FROM traces t" + where(conds()) + " GROUP BY t.session_id"
	if q.Cursor != "" {
		ts, tie, err := decodeCursor(q.Cursor)
		if err != nil {
			return store.SessionPage{}, err
		}
		pageSQL += " HAVING MAX(t.started) < " + b.Arg(ts) + " OR (MAX(t.started) = " + b.Arg(ts) + " AND t.session_id < " + b.Arg(tie) + ")"
	}
	limit := limitOf(q.Limit)
	pageSQL += " ORDER BY latest DESC, sid DESC LIMIT " + b.Arg(limit+1)
	query := "WITH page AS (" + pageSQL + ") " +
		"SELECT p.sid, MAX(t.user_id), COUNT(*), MIN(t.started), MAX(t.last_time), p.latest, " +
		db.D.Sum("t.input_tokens") + ", " + db.D.Sum("t.output_tokens") + ", SUM(" + CostExpr("t.cost") + "), " +
		"CAST(SUM(t.unpriced) AS BIGINT), CAST(SUM(t.errors) AS BIGINT), " +
		"CAST(SUM(CASE WHEN t.errors > 0 OR t.status NOT IN ('success', 'running') THEN 1 ELSE 0 END) AS BIGINT) " +
		"FROM page p JOIN traces t ON t.session_id = p.sid" + where(conds()) +
		" GROUP BY p.sid, p.latest ORDER BY p.latest DESC, p.sid DESC"
	rows, err := db.SQL.QueryContext(ctx, query, b.Args...)
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions in %s: %w", db.Name, err)
	}
	defer rows.Close()
	var page store.SessionPage
	for rows.Next() {
		var s store.SessionSummary
		var first, last, lastStarted int64
		if err := rows.Scan(&s.ID, &s.User, &s.Runs, &first, &last, &lastStarted, Sum(&s.InputTokens), Sum(&s.OutputTokens),
			Cost(&s.CostUSD), &s.UnpricedCalls, &s.Errors, &s.ErrorRuns); err != nil {
			return store.SessionPage{}, fmt.Errorf("list sessions in %s: %w", db.Name, err)
		}
		s.First, s.Last, s.LastStarted = time.Unix(0, first).UTC(), time.Unix(0, last).UTC(), time.Unix(0, lastStarted).UTC()
		page.Sessions = append(page.Sessions, s)
	}
	if err := rows.Err(); err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions in %s: %w", db.Name, err)
	}
	if len(page.Sessions) > limit {
		page.Sessions = page.Sessions[:limit]
		last := page.Sessions[limit-1]
		page.Next = encodeCursor(last.LastStarted.UnixNano(), last.ID)
	}
	return page, nil
}
