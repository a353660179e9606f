package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Scores (store.Scorer) live in two tables that both backends create in
// one migration: scores, one row per score, and score_names, the kind of
// every name. AddScores inserts each name of a batch into score_names
// (ON CONFLICT DO NOTHING) before it reads the names' kinds back, in the
// same transaction: a concurrent writer of the same name either committed
// first (its kind is read back) or waits for this transaction, so two
// batches cannot give one name two kinds.

// ScoreCond returns the condition on scores alias s that sc describes,
// adding its arguments to b. The operators map to SQL constants.
func ScoreCond(b *Builder, sc store.ScoreCond) string {
	if sc.Category != "" {
		if sc.Op == "!=" {
			return "s.kind = 'categorical' AND s.category <> " + b.Arg(sc.Category)
		}
		return "s.kind = 'categorical' AND s.category = " + b.Arg(sc.Category)
	}
	text := strconv.FormatFloat(sc.Value, 'g', -1, 64)
	switch sc.Op {
	case "=":
		return "((s.kind <> 'categorical' AND s.value = " + b.Arg(sc.Value) + ") OR (s.kind = 'categorical' AND s.category = " + b.Arg(text) + "))"
	case "!=":
		return "((s.kind <> 'categorical' AND s.value <> " + b.Arg(sc.Value) + ") OR (s.kind = 'categorical' AND s.category <> " + b.Arg(text) + "))"
	case "<":
		return "s.kind <> 'categorical' AND s.value < " + b.Arg(sc.Value)
	case "<=":
		return "s.kind <> 'categorical' AND s.value <= " + b.Arg(sc.Value)
	case ">":
		return "s.kind <> 'categorical' AND s.value > " + b.Arg(sc.Value)
	case ">=":
		return "s.kind <> 'categorical' AND s.value >= " + b.Arg(sc.Value)
	}
	return "1 = 0" // Filter.Validate refuses other operators
}

// scoreWhere is the condition on traces alias t of Filter.Scores.
func scoreWhere(b *Builder, conds []store.ScoreCond) []string {
	var c []string
	for _, sc := range conds {
		name := b.Arg(sc.Name)
		c = append(c, "EXISTS (SELECT 1 FROM scores s WHERE s.trace_id = t.trace_id AND s.name = "+name+" AND "+ScoreCond(b, sc)+")")
	}
	return c
}

const scoreCols = "s.id, s.trace_id, s.span_id, s.session, s.name, s.kind, s.value, s.category, s.comment, s.source, s.author, s.rule, s.ts"

func scanScore(sc interface{ Scan(...any) error }) (store.Score, error) {
	var s store.Score
	var tid, sid []byte
	var ts int64
	if err := sc.Scan(&s.ID, &tid, &sid, &s.Session, &s.Name, &s.Kind, &s.Value, &s.Category, &s.Comment, &s.Source, &s.Author, &s.Rule, &ts); err != nil {
		return s, err
	}
	copy(s.TraceID[:], tid)
	copy(s.SpanID[:], sid)
	s.Time = time.Unix(0, ts).UTC()
	return s, nil
}

// AddScores implements store.Scorer. SQLite callers hold their write
// lock around it.
func (db *DB) AddScores(ctx context.Context, in []store.Score) ([]store.Score, error) {
	if db.ReadOnly != nil {
		return nil, db.ReadOnly
	}
	if len(in) > store.MaxScoreBatch {
		return nil, fmt.Errorf("add scores: %d scores are more than the %d one batch may hold; send them in batches", len(in), store.MaxScoreBatch)
	}
	if len(in) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	scores := slices.Clone(in)
	kinds := map[string]store.ScoreKind{}
	first := map[string]int{}
	for i := range scores {
		s := &scores[i]
		if err := store.ValidateScore(i, s); err != nil {
			return nil, err
		}
		if s.ID == "" {
			s.ID = store.NewScoreID()
		}
		if s.Time.IsZero() {
			s.Time = now
		}
		s.Time = s.Time.UTC()
		if k, ok := kinds[s.Name]; ok && k != s.Kind {
			return nil, &store.ScoreError{Index: i, Field: "kind", Err: fmt.Errorf("score %s is %s here and %s earlier in the batch; a name has one kind", s.Name, s.Kind, k)}
		}
		if _, ok := kinds[s.Name]; !ok {
			kinds[s.Name], first[s.Name] = s.Kind, i
		}
	}
	// A score whose id is given twice is stored once: the first wins.
	seen := make(map[string]bool, len(scores))
	order := make([]int, 0, len(scores))
	for i := range scores {
		if !seen[scores[i].ID] {
			seen[scores[i].ID] = true
			order = append(order, i)
		}
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	defer tx.Rollback()
	// Names, then ids, in sorted order: concurrent writers take their
	// locks in the same order and cannot deadlock. A batch takes a fixed
	// number of statements (two for the names, one per scoreRows
	// scores), not a few per score: a transaction of many scores holds
	// the store's writer briefly.
	names := slices.Sorted(maps.Keys(kinds))
	b := db.D.NewBuilder()
	var q strings.Builder
	q.WriteString("INSERT INTO score_names (name, kind) VALUES ")
	for i, name := range names {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + b.Arg(name) + ", " + b.Arg(string(kinds[name])) + ")")
	}
	q.WriteString(" ON CONFLICT (name) DO NOTHING")
	if _, err := tx.ExecContext(ctx, q.String(), b.Args...); err != nil {
		return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	b = db.D.NewBuilder()
	nameList := b.List(len(names), func(i int) any { return names[i] })
	rows, err := tx.QueryContext(ctx, "SELECT name, kind FROM score_names WHERE name IN "+nameList, b.Args...)
	if err != nil {
		return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	have := make(map[string]string, len(names))
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			rows.Close()
			return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
		}
		have[name] = kind
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	for _, name := range names {
		if store.ScoreKind(have[name]) != kinds[name] {
			return nil, &store.ScoreError{Index: first[name], Field: "kind", Err: fmt.Errorf("score %s is %s in this store, not %s (a name keeps the kind of its first score; use another name)", name, have[name], kinds[name])}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(scores[a].ID, scores[b].ID) })
	stored := make(map[string]bool, len(order))
	for len(order) > 0 {
		n := min(len(order), scoreRows)
		if err := db.insertScores(ctx, tx, scores, order[:n], stored); err != nil {
			return nil, err
		}
		order = order[n:]
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	out := make([]store.Score, 0, len(stored))
	for i := range scores {
		if stored[scores[i].ID] {
			out = append(out, scores[i])
			delete(stored, scores[i].ID) // a second score of the id was not stored
		}
	}
	return out, nil
}

// scoreRows bounds the scores of one INSERT statement: 13 arguments a
// score, well within both backends' limits on a statement's arguments.
const scoreRows = 250

// insertScores inserts the scores at idx in one statement and marks in
// stored the ids it inserted (those not stored already).
func (db *DB) insertScores(ctx context.Context, tx *sql.Tx, scores []store.Score, idx []int, stored map[string]bool) error {
	b := db.D.NewBuilder()
	var q strings.Builder
	q.WriteString("INSERT INTO scores (id, trace_id, span_id, session, name, kind, value, category, comment, source, author, rule, ts) VALUES ")
	for k, i := range idx {
		s := &scores[i]
		var tid, sid any
		if !s.TraceID.IsZero() {
			tid = s.TraceID[:]
		}
		if !s.SpanID.IsZero() {
			sid = s.SpanID[:]
		}
		if k > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + b.Arg(s.ID) + ", " + b.Arg(tid) + ", " + b.Arg(sid) + ", " + b.Arg(s.Session) + ", " + b.Arg(s.Name) + ", " + b.Arg(string(s.Kind)) + ", " +
			b.Arg(s.Value) + ", " + b.Arg(s.Category) + ", " + b.Arg(s.Comment) + ", " + b.Arg(string(s.Source)) + ", " + b.Arg(s.Author) + ", " +
			b.Arg(s.Rule) + ", " + b.Arg(s.Time.UnixNano()) + ")")
	}
	q.WriteString(" ON CONFLICT (id) DO NOTHING RETURNING id")
	rows, err := tx.QueryContext(ctx, q.String(), b.Args...)
	if err != nil {
		return fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("add scores to %s: %w", db.Name, err)
		}
		stored[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("add scores to %s: %w", db.Name, err)
	}
	return nil
}

// scoreConds returns the conditions on scores alias s of f, without its
// cursor.
func scoreConds(b *Builder, f *store.ScoreFilter) []string {
	var c []string
	if len(f.TraceIDs) > 0 {
		c = append(c, "s.trace_id IN "+b.In(f.TraceIDs))
	}
	if !f.SpanID.IsZero() {
		c = append(c, "s.span_id = "+b.Arg(f.SpanID[:]))
	}
	if f.Session != "" {
		c = append(c, "s.session = "+b.Arg(f.Session))
	}
	if f.Name != "" {
		c = append(c, "s.name = "+b.Arg(f.Name))
	}
	if f.Source != "" {
		c = append(c, "s.source = "+b.Arg(string(f.Source)))
	}
	if f.Rule != "" {
		c = append(c, "s.rule = "+b.Arg(f.Rule))
	}
	if !f.Since.IsZero() {
		c = append(c, "s.ts >= "+b.Arg(f.Since.UnixNano()))
	}
	if !f.Until.IsZero() {
		c = append(c, "s.ts < "+b.Arg(f.Until.UnixNano()))
	}
	return c
}

// Scores implements store.Scorer.
func (db *DB) Scores(ctx context.Context, f store.ScoreFilter) (store.ScorePage, error) {
	if err := f.Validate(); err != nil {
		return store.ScorePage{}, err
	}
	b := db.D.NewBuilder()
	c := scoreConds(b, &f)
	if f.Cursor != "" {
		t, tie, err := decodeCursor(f.Cursor)
		if err != nil {
			return store.ScorePage{}, err
		}
		if len(tie) != 32 {
			return store.ScorePage{}, badCursor(f.Cursor)
		}
		c = append(c, "(s.ts < "+b.Arg(t)+" OR (s.ts = "+b.Arg(t)+" AND s.id < "+b.Arg(tie)+"))")
	}
	limit := f.Limit
	if limit == 0 {
		limit = store.DefaultScoreLimit
	}
	from := " FROM scores s"
	if len(f.TraceIDs) > 0 && !db.D.Postgres {
		// At most MaxFilterIDs traces' scores, sorted: without the
		// hint SQLite, which keeps no statistics, reads every score of
		// the name (or session) through its index instead, to save the
		// sort, which costs as much as the store holds scores of it.
		from += " INDEXED BY scores_trace"
	}
	rows, err := db.SQL.QueryContext(ctx, "SELECT "+scoreCols+from+where(c)+" ORDER BY s.ts DESC, s.id DESC LIMIT "+b.Arg(limit+1), b.Args...)
	if err != nil {
		return store.ScorePage{}, fmt.Errorf("list scores in %s: %w", db.Name, err)
	}
	defer rows.Close()
	page := store.ScorePage{Scores: []store.Score{}}
	for rows.Next() {
		s, err := scanScore(rows)
		if err != nil {
			return store.ScorePage{}, fmt.Errorf("list scores in %s: %w", db.Name, err)
		}
		page.Scores = append(page.Scores, s)
	}
	if err := rows.Err(); err != nil {
		return store.ScorePage{}, fmt.Errorf("list scores in %s: %w", db.Name, err)
	}
	if len(page.Scores) > limit {
		page.Scores = page.Scores[:limit]
		last := page.Scores[limit-1]
		page.Next = encodeCursor(last.Time.UnixNano(), last.ID)
	}
	return page, nil
}

// DeleteScores implements store.Scorer. SQLite callers hold their write
// lock around it.
func (db *DB) DeleteScores(ctx context.Context, ids ...string) (int, error) {
	if db.ReadOnly != nil {
		return 0, db.ReadOnly
	}
	n := 0
	for chunk := range slices.Chunk(ids, 500) {
		b := db.D.NewBuilder()
		in := "("
		for i, id := range chunk {
			if i > 0 {
				in += ", "
			}
			in += b.Arg(id)
		}
		res, err := db.SQL.ExecContext(ctx, "DELETE FROM scores WHERE id IN "+in+")", b.Args...)
		if err != nil {
			return n, fmt.Errorf("delete scores from %s: %w", db.Name, err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	return n, nil
}

// ScoreKinds implements store.Scorer.
func (db *DB) ScoreKinds(ctx context.Context) (map[string]store.ScoreKind, error) {
	rows, err := db.SQL.QueryContext(ctx, "SELECT name, kind FROM score_names")
	if err != nil {
		return nil, fmt.Errorf("score kinds in %s: %w", db.Name, err)
	}
	defer rows.Close()
	out := map[string]store.ScoreKind{}
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			return nil, err
		}
		out[name] = store.ScoreKind(kind)
	}
	return out, rows.Err()
}

// maxStatCategories bounds the categories ScoreStats reports per name:
// the most frequent are kept.
const maxStatCategories = 50

// ScoreStats implements store.Scorer.
func (db *DB) ScoreStats(ctx context.Context, q store.ScoreStatsQuery) ([]store.ScoreStats, error) {
	now := time.Now()
	if err := q.Validate(now); err != nil {
		return nil, err
	}
	f := store.ScoreFilter{Name: q.Name, Since: q.Since, Until: q.Until}
	fail := func(err error) ([]store.ScoreStats, error) {
		return nil, fmt.Errorf("score stats of %s: %w", db.Name, err)
	}
	b := db.D.NewBuilder()
	rows, err := db.SQL.QueryContext(ctx, "SELECT s.name, MIN(s.kind), COUNT(*), AVG(s.value), MIN(s.value), MAX(s.value) FROM scores s"+
		where(scoreConds(b, &f))+" GROUP BY s.name ORDER BY s.name", b.Args...)
	if err != nil {
		return fail(err)
	}
	var out []store.ScoreStats
	idx := map[string]int{}
	for rows.Next() {
		var st store.ScoreStats
		var mean, lo, hi sql.NullFloat64
		if err := rows.Scan(&st.Name, &st.Kind, &st.Count, &mean, &lo, &hi); err != nil {
			rows.Close()
			return fail(err)
		}
		st.Mean = mean.Float64
		if st.Kind == store.ScoreNumeric {
			st.Min, st.Max = lo.Float64, hi.Float64
			st.Histogram = make([]int64, store.ScoreBins)
		}
		idx[st.Name] = len(out)
		out = append(out, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if len(out) == 0 {
		return []store.ScoreStats{}, nil
	}
	// Categories of categorical scores, true and false of boolean ones.
	b = db.D.NewBuilder()
	c := append(scoreConds(b, &f), "s.kind <> 'numeric'")
	rows, err = db.SQL.QueryContext(ctx, "SELECT s.name, s.kind, s.category, s.value, COUNT(*) FROM scores s"+where(c)+
		" GROUP BY s.name, s.kind, s.category, s.value", b.Args...)
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var name, kind, cat string
		var v float64
		var n int64
		if err := rows.Scan(&name, &kind, &cat, &v, &n); err != nil {
			rows.Close()
			return fail(err)
		}
		i, ok := idx[name]
		if !ok {
			continue
		}
		if store.ScoreKind(kind) == store.ScoreBoolean {
			cat = "false"
			if v != 0 {
				cat = "true"
			}
		}
		if out[i].Categories == nil {
			out[i].Categories = map[string]int64{}
		}
		out[i].Categories[cat] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	for i := range out {
		trimCategories(&out[i])
	}
	// Histograms of numeric scores: ScoreBins bins between each name's
	// min and max. Values are within ±store.MaxScoreValue, so no
	// difference overflows.
	b = db.D.NewBuilder()
	inner := append(scoreConds(b, &f), "s.kind = 'numeric'")
	sub := "SELECT s.name, MIN(s.value) AS lo, MAX(s.value) AS hi FROM scores s" + where(inner) + " GROUP BY s.name"
	outer := append(scoreConds(b, &f), "s.kind = 'numeric'")
	ratio := "(s.value - m.lo) / (m.hi - m.lo) * " + strconv.Itoa(store.ScoreBins)
	bin := "CAST(" + ratio + " AS INTEGER)"
	if db.D.Postgres {
		bin = "CAST(FLOOR(" + ratio + ") AS BIGINT)"
	}
	rows, err = db.SQL.QueryContext(ctx, "SELECT s.name, CASE WHEN m.hi = m.lo THEN 0 ELSE "+bin+" END, COUNT(*) FROM scores s JOIN ("+sub+") m ON m.name = s.name"+
		where(outer)+" GROUP BY 1, 2", b.Args...)
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var name string
		var k, n int64
		if err := rows.Scan(&name, &k, &n); err != nil {
			rows.Close()
			return fail(err)
		}
		if i, ok := idx[name]; ok && out[i].Histogram != nil {
			out[i].Histogram[min(max(k, 0), store.ScoreBins-1)] += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if q.Bucket > 0 {
		// The bucket's arguments come first in the text, so they are
		// added to the builder before the conditions'.
		b = db.D.NewBuilder()
		bucket := "(s.ts - " + b.Arg(q.Since.UnixNano()) + ") / " + b.Arg(int64(q.Bucket))
		c := scoreConds(b, &f)
		rows, err = db.SQL.QueryContext(ctx, "SELECT s.name, "+bucket+", COUNT(*), AVG(s.value) FROM scores s"+where(c)+" GROUP BY 1, 2 ORDER BY 1, 2", b.Args...)
		if err != nil {
			return fail(err)
		}
		for rows.Next() {
			var name string
			var k, n int64
			var mean sql.NullFloat64
			if err := rows.Scan(&name, &k, &n, &mean); err != nil {
				rows.Close()
				return fail(err)
			}
			if i, ok := idx[name]; ok {
				out[i].Trend = append(out[i].Trend, store.ScoreBucket{Start: q.Since.Add(time.Duration(k) * q.Bucket).UTC(), Count: n, Mean: mean.Float64})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// trimCategories keeps the maxStatCategories most frequent categories.
func trimCategories(st *store.ScoreStats) {
	if len(st.Categories) <= maxStatCategories {
		return
	}
	keys := slices.Collect(maps.Keys(st.Categories))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(st.Categories[b], st.Categories[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, k := range keys[maxStatCategories:] {
		delete(st.Categories, k)
	}
}
