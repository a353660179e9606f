// Package sqlite is Loupe's embedded store: one SQLite file, written with
// the pure-Go modernc.org/sqlite driver (no cgo). It registers itself with
// package store as the "sqlite" backend, which store.Open uses for every
// DSN that is not a postgres:// URL.
//
// The database runs in WAL mode with synchronous=NORMAL, so a committed
// Append survives the writing process being killed (only an OS crash or
// power loss can lose the last commits), and readers never block the
// writer. Writes within one process are serialized by a mutex; writers in
// several processes wait on each other through busy_timeout. Text search
// uses an FTS5 index (contentless, with deletes) over each record's name,
// error, input, output and thinking.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/trace"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

func init() {
	store.Register("sqlite", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
}

// SchemaVersion is the newest schema this package knows; migrations[i]
// brings a store from version i to i+1.
const SchemaVersion = 1

var migrations = []string{
	`CREATE TABLE traces (
		trace_id BLOB PRIMARY KEY,
		name TEXT NOT NULL DEFAULT '',
		started INTEGER NOT NULL,
		last_time INTEGER NOT NULL,
		run_duration INTEGER,
		status TEXT NOT NULL DEFAULT 'running',
		records INTEGER NOT NULL DEFAULT 0,
		iterations INTEGER NOT NULL DEFAULT 0,
		model_calls INTEGER NOT NULL DEFAULT 0,
		tool_calls INTEGER NOT NULL DEFAULT 0,
		input_tokens INTEGER NOT NULL DEFAULT 0,
		output_tokens INTEGER NOT NULL DEFAULT 0,
		cost REAL NOT NULL DEFAULT 0,
		errors INTEGER NOT NULL DEFAULT 0
	) WITHOUT ROWID;
	CREATE INDEX traces_started ON traces (started, trace_id);
	CREATE INDEX traces_name ON traces (name, started);
	CREATE TABLE trace_models (
		trace_id BLOB NOT NULL, model TEXT NOT NULL,
		calls INTEGER NOT NULL, errors INTEGER NOT NULL,
		input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
		cached_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost REAL NOT NULL,
		PRIMARY KEY (trace_id, model)
	) WITHOUT ROWID;
	CREATE INDEX trace_models_model ON trace_models (model, trace_id);
	CREATE TABLE trace_tools (
		trace_id BLOB NOT NULL, tool TEXT NOT NULL,
		calls INTEGER NOT NULL, errors INTEGER NOT NULL, total_ns INTEGER NOT NULL,
		PRIMARY KEY (trace_id, tool)
	) WITHOUT ROWID;
	CREATE INDEX trace_tools_tool ON trace_tools (tool, trace_id);
	CREATE TABLE trace_tags (
		trace_id BLOB NOT NULL, tag TEXT NOT NULL,
		PRIMARY KEY (trace_id, tag)
	) WITHOUT ROWID;
	CREATE INDEX trace_tags_tag ON trace_tags (tag, trace_id);
	CREATE TABLE records (
		id INTEGER PRIMARY KEY,
		trace_id BLOB NOT NULL,
		seq INTEGER NOT NULL,
		ts INTEGER NOT NULL,
		type TEXT NOT NULL,
		doc BLOB NOT NULL,
		UNIQUE (trace_id, seq)
	);
	CREATE INDEX records_ts ON records (ts);
	CREATE INDEX records_type_ts ON records (type, ts);
	CREATE VIRTUAL TABLE records_fts USING fts5 (name, error, input, output, thinking, content='', contentless_delete=1);`,
}

// Store is a SQLite-backed store.Store. Create one with Open.
type Store struct {
	sqlstore.DB
	wmu sync.Mutex // serializes this process's write transactions
}

var _ store.Store = (*Store)(nil)

// Path returns the file path of a SQLite DSN: dsn without a "file:"
// prefix and without query parameters.
func Path(dsn string) string {
	p := strings.TrimPrefix(dsn, "file:")
	p, _, _ = strings.Cut(p, "?")
	return p
}

// Open opens (creating it if needed) the SQLite store at dsn, a file path
// optionally prefixed with "file:", and applies pending migrations. A store
// with a newer schema than SchemaVersion is opened read-only: writes return
// a *store.SchemaVersionError.
func Open(ctx context.Context, dsn string) (*Store, error) {
	path := Path(dsn)
	if path == "" {
		return nil, errors.New("sqlite store: empty path")
	}
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("sqlite store %s: %w", path, err)
		}
	}
	conn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", conn)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	s := &Store{DB: sqlstore.DB{SQL: db, Name: path, D: sqlstore.Dialect{
		TextMatch:  textMatch,
		DeleteText: deleteText,
	}}}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite store %s: %w", s.Name, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		return fmt.Errorf("sqlite store %s: %w (is it a SQLite database?)", s.Name, err)
	}
	var v int
	err = tx.QueryRowContext(ctx, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite store %s: read schema version: %w", s.Name, err)
	}
	if v > SchemaVersion {
		s.ReadOnly = &store.SchemaVersionError{Store: s.Name, Found: v, Known: SchemaVersion}
		return nil
	}
	for ; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("sqlite store %s: migrate schema to version %d: %w", s.Name, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", SchemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}

// textMatch matches through the FTS5 index. Each term becomes an FTS5
// string (a phrase of its tokens), so nothing in it is FTS5 syntax.
func textMatch(b *sqlstore.Builder, terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return "r.id IN (SELECT rowid FROM records_fts WHERE records_fts MATCH " + b.Arg(strings.Join(q, " AND ")) + ")"
}

func deleteText(ctx context.Context, tx *sql.Tx, b *sqlstore.Builder, idsCond string) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM records_fts WHERE rowid IN (SELECT id FROM records WHERE "+idsCond+")", b.Args...)
	return err
}

// Append implements store.Store: one immediate transaction with prepared
// statements; INSERT … ON CONFLICT DO NOTHING makes it idempotent, and only
// the rows actually inserted update the summaries and the text index.
func (s *Store) Append(ctx context.Context, recs []trace.Record) (int, error) {
	if s.ReadOnly != nil {
		return 0, s.ReadOnly
	}
	if err := sqlstore.Validate(recs); err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		return 0, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.SQL.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, "INSERT INTO records (trace_id, seq, ts, type, doc) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	fts, err := tx.PrepareContext(ctx, "INSERT INTO records_fts (rowid, name, error, input, output, thinking) VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		return 0, err
	}
	defer fts.Close()
	added := make([]*trace.Record, 0, len(recs))
	var buf []byte
	for i := range recs {
		r := &recs[i]
		buf = r.AppendJSON(buf[:0])
		res, err := ins.ExecContext(ctx, r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf)
		if err != nil {
			return 0, fmt.Errorf("append to %s: record %d (trace %s seq %d): %w", s.Name, i, r.TraceID, r.Seq, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // already stored
		}
		id, err := res.LastInsertId()
		if err != nil {
			return 0, err
		}
		added = append(added, r)
		f := sqlstore.TextFields(r)
		if _, err := fts.ExecContext(ctx, id, f[0].Text, f[1].Text, f[2].Text, f[3].Text, f[4].Text); err != nil {
			return 0, fmt.Errorf("append to %s: index record %d: %w", s.Name, i, err)
		}
	}
	if len(added) == 0 {
		return 0, nil
	}
	exec := func(ctx context.Context, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	if err := s.D.ApplyDeltas(ctx, exec, sqlstore.Deltas(added)); err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("append to %s: commit: %w", s.Name, err)
	}
	return len(added), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ids ...trace.TraceID) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.DB.Delete(ctx, ids...)
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, p store.PrunePolicy) (store.PruneResult, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.DB.Prune(ctx, p)
}
