package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// failedCond is a trace (alias t) that counts as failed in error rates:
// store.SummaryFailed in SQL, as Aggregate counts ErrorTraces.
const failedCond = "(t.errors > 0 OR t.status NOT IN ('success', 'running'))"

// WindowStats implements store.WindowStater with three statements over the
// traces table, whose (started, trace_id) index bounds a window: the
// totals; the nearest-rank 95th percentile of the durations, as the row
// at that offset of the durations in order; and the sample.
func (db *DB) WindowStats(ctx context.Context, q store.WindowQuery) (store.WindowStats, error) {
	var w store.WindowStats
	if err := q.Validate(); err != nil {
		return w, err
	}
	cutoff := db.cutoff()
	b := db.D.NewBuilder()
	cond := where(Where(b, &q.Filter, cutoff))
	row := db.SQL.QueryRowContext(ctx, "SELECT COUNT(*), CAST(COALESCE(SUM(CASE WHEN "+failedCond+" THEN 1 ELSE 0 END), 0) AS BIGINT), "+
		"SUM("+CostExpr("t.cost")+"), "+db.D.Sum("t.input_tokens")+", "+db.D.Sum("t.output_tokens")+" FROM traces t"+cond, b.Args...)
	if err := row.Scan(&w.Traces, &w.ErrorTraces, Cost(&w.CostUSD), Sum(&w.InputTokens), Sum(&w.OutputTokens)); err != nil {
		return w, fmt.Errorf("window stats %s: %w", db.Name, err)
	}
	if w.Traces == 0 {
		return w, nil
	}
	b = db.D.NewBuilder()
	cond = where(Where(b, &q.Filter, cutoff))
	var p95 int64
	row = db.SQL.QueryRowContext(ctx, "SELECT "+DurationExpr+" AS d FROM traces t"+cond+" ORDER BY d LIMIT 1 OFFSET "+b.Arg(store.P95Rank(w.Traces)), b.Args...)
	if err := row.Scan(Sum(&p95)); err != nil && err != sql.ErrNoRows {
		return w, fmt.Errorf("window stats %s: %w", db.Name, err)
	}
	w.P95 = time.Duration(p95)
	if q.Sample == 0 {
		return w, nil
	}
	b = db.D.NewBuilder()
	conds := Where(b, &q.Filter, cutoff)
	order := "t.started DESC, t.trace_id DESC"
	switch q.SampleBy {
	case store.SampleErrors:
		conds = append(conds, failedCond)
	case store.SampleDuration:
		order = DurationExpr + " DESC, " + order
	case store.SampleCost:
		order = CostExpr("t.cost") + " DESC, " + order
	case store.SampleTokens:
		order = "t.input_tokens + t.output_tokens DESC, " + order
	}
	rows, err := db.SQL.QueryContext(ctx, "SELECT t.trace_id FROM traces t"+where(conds)+" ORDER BY "+order+" LIMIT "+b.Arg(q.Sample), b.Args...)
	if err != nil {
		return w, fmt.Errorf("window stats %s: %w", db.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			return w, fmt.Errorf("window stats %s: %w", db.Name, err)
		}
		w.Sample = append(w.Sample, trace.TraceID(id))
	}
	return w, rows.Err()
}

// The alert tables (the backends' migrations create them):
//
//	alert_firings (id, monitor, metric, filter, started, resolved,
//	    value, threshold, window_ns, resolved_value, trace_ids)
//	    with a unique index on monitor WHERE resolved IS NULL: one open
//	    firing per monitor, whichever collector opens it;
//	alert_deliveries (firing_id, event, target, attempt, ts, status, ok,
//	    error).
//
// Times are Unix nanoseconds; trace_ids is the sample's hex ids joined by
// commas.

// OpenFiring implements store.Alerts.
func (db *DB) OpenFiring(ctx context.Context, f store.Firing) (store.Firing, bool, error) {
	if db.ReadOnly != nil {
		return store.Firing{}, false, db.ReadOnly
	}
	f.Resolved, f.ResolvedValue, f.Deliveries = time.Time{}, 0, nil
	if err := store.ValidateFiring(&f); err != nil {
		return store.Firing{}, false, err
	}
	ids := make([]string, len(f.TraceIDs))
	for i, id := range f.TraceIDs {
		ids[i] = id.String()
	}
	b := db.D.NewBuilder()
	res, err := db.SQL.ExecContext(ctx, "INSERT INTO alert_firings (id, monitor, metric, filter, started, value, threshold, window_ns, trace_ids) VALUES ("+
		strings.Join([]string{b.Arg(f.ID), b.Arg(f.Monitor), b.Arg(f.Metric), b.Arg(f.Filter), b.Arg(f.Started.UnixNano()),
			b.Arg(f.Value), b.Arg(f.Threshold), b.Arg(int64(f.Window)), b.Arg(strings.Join(ids, ","))}, ", ")+") ON CONFLICT DO NOTHING", b.Args...)
	if err != nil {
		return store.Firing{}, false, fmt.Errorf("store %s: opening a firing of monitor %s: %w", db.Name, f.Monitor, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return f, true, nil
	}
	open, err := db.Firings(ctx, store.FiringFilter{Monitor: f.Monitor, Open: true, Limit: 1})
	if err != nil {
		return store.Firing{}, false, err
	}
	if len(open) == 0 {
		return store.Firing{}, false, fmt.Errorf("store %s: firing %s of monitor %s: %w", db.Name, f.ID, f.Monitor, store.ErrFiringExists)
	}
	return open[0], false, nil
}

// ResolveFiring implements store.Alerts.
func (db *DB) ResolveFiring(ctx context.Context, id string, at time.Time, value float64) (bool, error) {
	if db.ReadOnly != nil {
		return false, db.ReadOnly
	}
	if !finite(value) {
		return false, fmt.Errorf("resolve firing %s: value %v is not a finite number", id, value)
	}
	b := db.D.NewBuilder()
	res, err := db.SQL.ExecContext(ctx, "UPDATE alert_firings SET resolved = "+b.Arg(at.UnixNano())+", resolved_value = "+b.Arg(value)+
		" WHERE id = "+b.Arg(id)+" AND resolved IS NULL", b.Args...)
	if err != nil {
		return false, fmt.Errorf("store %s: resolving firing %s: %w", db.Name, id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AddDelivery implements store.Alerts.
func (db *DB) AddDelivery(ctx context.Context, d store.Delivery) error {
	if db.ReadOnly != nil {
		return db.ReadOnly
	}
	if err := store.ValidateDelivery(&d); err != nil {
		return err
	}
	ok := 0
	if d.OK {
		ok = 1
	}
	b := db.D.NewBuilder()
	_, err := db.SQL.ExecContext(ctx, "INSERT INTO alert_deliveries (firing_id, event, target, attempt, ts, status, ok, error) VALUES ("+
		strings.Join([]string{b.Arg(d.FiringID), b.Arg(d.Event), b.Arg(d.Target), b.Arg(d.Attempt), b.Arg(d.Time.UnixNano()),
			b.Arg(d.Status), b.Arg(ok), b.Arg(store.ClipAlertText(d.Error))}, ", ")+") ON CONFLICT DO NOTHING", b.Args...)
	if err != nil {
		return fmt.Errorf("store %s: storing a delivery of firing %s: %w", db.Name, d.FiringID, err)
	}
	return nil
}

// Firings implements store.Alerts.
func (db *DB) Firings(ctx context.Context, f store.FiringFilter) ([]store.Firing, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = 100
	case limit > 1000:
		limit = 1000
	}
	b := db.D.NewBuilder()
	var conds []string
	if f.Monitor != "" {
		conds = append(conds, "monitor = "+b.Arg(f.Monitor))
	}
	if f.Open {
		conds = append(conds, "resolved IS NULL")
	}
	if !f.Since.IsZero() {
		conds = append(conds, "started >= "+b.Arg(f.Since.UnixNano()))
	}
	rows, err := db.SQL.QueryContext(ctx, "SELECT id, monitor, metric, filter, started, resolved, value, threshold, window_ns, resolved_value, trace_ids FROM alert_firings"+
		where(conds)+" ORDER BY started DESC, id DESC LIMIT "+b.Arg(limit), b.Args...)
	if err != nil {
		return nil, fmt.Errorf("store %s: reading firings: %w", db.Name, err)
	}
	var out []store.Firing
	byID := map[string]int{}
	for rows.Next() {
		var fi store.Firing
		var started, window int64
		var resolved sql.NullInt64
		var rv sql.NullFloat64
		var ids string
		if err := rows.Scan(&fi.ID, &fi.Monitor, &fi.Metric, &fi.Filter, &started, &resolved, &fi.Value, &fi.Threshold, &window, &rv, &ids); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store %s: reading firings: %w", db.Name, err)
		}
		fi.Started = time.Unix(0, started).UTC()
		if resolved.Valid {
			fi.Resolved = time.Unix(0, resolved.Int64).UTC()
		}
		fi.ResolvedValue = rv.Float64
		fi.Window = time.Duration(window)
		fi.TraceIDs = []trace.TraceID{}
		for s := range strings.SplitSeq(ids, ",") {
			var id trace.TraceID
			if n, err := hex.Decode(id[:], []byte(s)); err == nil && n == len(id) {
				fi.TraceIDs = append(fi.TraceIDs, id)
			}
		}
		fi.Deliveries = []store.Delivery{}
		byID[fi.ID] = len(out)
		out = append(out, fi)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store %s: reading firings: %w", db.Name, err)
	}
	if len(out) == 0 {
		return out, nil
	}
	b = db.D.NewBuilder()
	in := b.List(len(out), func(i int) any { return out[i].ID })
	rows, err = db.SQL.QueryContext(ctx, "SELECT firing_id, event, target, attempt, ts, status, ok, error FROM alert_deliveries WHERE firing_id IN "+
		in+" ORDER BY ts, attempt", b.Args...)
	if err != nil {
		return nil, fmt.Errorf("store %s: reading deliveries: %w", db.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var d store.Delivery
		var ts int64
		var ok int
		if err := rows.Scan(&d.FiringID, &d.Event, &d.Target, &d.Attempt, &ts, &d.Status, &ok, &d.Error); err != nil {
			return nil, fmt.Errorf("store %s: reading deliveries: %w", db.Name, err)
		}
		d.Time = time.Unix(0, ts).UTC()
		d.OK = ok != 0
		if i, found := byID[d.FiringID]; found {
			out[i].Deliveries = append(out[i].Deliveries, d)
		}
	}
	return out, rows.Err()
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
