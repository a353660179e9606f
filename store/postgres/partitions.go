package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Records are partitioned by time (migration 5): one partition per UTC
// day of a record's ts, named records_pYYYYMMDD, and a default partition
// for any time without one (records imported from long ago, clocks far
// off, and everything stored before migration 5 for days that have no
// partition). The store keeps partitions ready from yesterday to
// partitionsAhead days ahead: at Open and, as days pass, from Append.
// Retention (Prune with OlderThan) drops the partitions wholly older than
// its cutoff, which costs nothing per row, then deletes what is left of
// the expired traces row by row.

const (
	partitionsAhead = 7       // days of partitions kept ready after today
	partitionLock   = 7612002 // advisory lock of the partition maintenance
	partitionPrefix = "records_p"
	day             = 24 * time.Hour
)

func partitionName(d time.Time) string { return partitionPrefix + d.Format("20060102") }

// partitionDay parses a partition's name; ok is false for other tables.
func partitionDay(name string) (time.Time, bool) {
	s, ok := strings.CutPrefix(name, partitionPrefix)
	if !ok || len(s) != 8 {
		return time.Time{}, false
	}
	d, err := time.Parse("20060102", s)
	return d, err == nil
}

// partitions returns the day partitions of records by name.
func partitions(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'records'::regclass")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if _, ok := partitionDay(n); ok {
			names[n] = true
		}
	}
	return names, rows.Err()
}

// ensurePartitions creates the day partitions from the day before now to
// partitionsAhead days after it that do not exist yet. Rows that the
// default partition holds for a new partition's day move into it. Several
// processes may call it at once: one at a time does the work.
func (s *Store) ensurePartitions(ctx context.Context, now time.Time) error {
	today := now.UTC().Truncate(day)
	if ready := s.partitionsReady.Load(); ready != 0 && today.Add(2*day).UnixNano() < ready {
		return nil
	}
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres store %s: partitions: %w", s.db.Name, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", partitionLock); err != nil {
		return fmt.Errorf("postgres store %s: partitions: %w", s.db.Name, err)
	}
	have, err := partitions(ctx, tx)
	if err != nil {
		return fmt.Errorf("postgres store %s: list partitions: %w", s.db.Name, err)
	}
	first, last := today.Add(-day), today.Add(partitionsAhead*day)
	// The days of the range that the default partition holds rows of, in
	// one scan of it.
	inDefault := map[int64]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT div(ts - $1, $2) FROM records_default WHERE ts >= $1 AND ts < $3",
		first.UnixNano(), int64(day), last.Add(day).UnixNano())
	if err != nil {
		return fmt.Errorf("postgres store %s: partitions: %w", s.db.Name, err)
	}
	for rows.Next() {
		var i int64
		if err := rows.Scan(&i); err != nil {
			rows.Close()
			return err
		}
		inDefault[i] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, d := int64(0), first; !d.After(last); i, d = i+1, d.Add(day) {
		name := partitionName(d)
		if have[name] {
			continue
		}
		lo, hi := d.UnixNano(), d.Add(day).UnixNano()
		var stmts []string
		if !inDefault[i] {
			stmts = []string{fmt.Sprintf("CREATE TABLE %s PARTITION OF records FOR VALUES FROM (%d) TO (%d)", name, lo, hi)}
		} else {
			// A partition cannot be created over rows the default
			// partition holds: move them into a table, then attach it.
			stmts = []string{
				fmt.Sprintf("CREATE TABLE %s (LIKE records INCLUDING DEFAULTS)", name),
				fmt.Sprintf("WITH moved AS (DELETE FROM records_default WHERE ts >= %d AND ts < %d RETURNING id, trace_id, seq, ts, type, doc, tsv, body) "+
					"INSERT INTO %s (id, trace_id, seq, ts, type, doc, tsv, body) SELECT * FROM moved", lo, hi, name),
				fmt.Sprintf("ALTER TABLE records ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)", name, lo, hi),
			}
		}
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("postgres store %s: create partition %s: %w", s.db.Name, name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres store %s: partitions: %w", s.db.Name, err)
	}
	s.partitionsReady.Store(last.UnixNano())
	return nil
}

// dropPartitions drops the day partitions that end at or before cutoff
// and returns how many records they held.
func (s *Store) dropPartitions(ctx context.Context, cutoff time.Time) (int, error) {
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("prune %s: %w", s.db.Name, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", partitionLock); err != nil {
		return 0, fmt.Errorf("prune %s: %w", s.db.Name, err)
	}
	have, err := partitions(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("prune %s: list partitions: %w", s.db.Name, err)
	}
	total := 0
	for name := range have {
		d, _ := partitionDay(name)
		if d.Add(day).After(cutoff) {
			continue
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+name).Scan(&n); err != nil {
			return 0, fmt.Errorf("prune %s: count %s: %w", s.db.Name, name, err)
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+name); err != nil {
			return 0, fmt.Errorf("prune %s: drop %s: %w", s.db.Name, name, err)
		}
		total += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("prune %s: %w", s.db.Name, err)
	}
	return total, nil
}
