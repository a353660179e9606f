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
	CREATE INDEX records_type ON records (type, id);
	CREATE VIRTUAL TABLE records_fts USING fts5 (name, error, input, output, thinking, content='', contentless_delete=1);`,
}

// Store is a SQLite-backed store.Store. Create one with Open.
type Store struct {
	sqlstore.DB
	wmu   sync.Mutex           // serializes this process's write transactions; guards the fields below
	wconn *sql.Conn            // the connection Append writes on, with its statements prepared once
	stmts map[string]*sql.Stmt // prepared on wconn, by SQL text
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
	conn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-65536)&_txlock=immediate"
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
	s.wconn, err = db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	s.stmts = map[string]*sql.Stmt{}
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
	if s.wconn == nil {
		return 0, fmt.Errorf("append to %s: store is closed", s.Name)
	}
	// The transaction is driven by hand on the write connection so that
	// its statements, prepared once, are reused (database/sql's Tx would
	// prepare them again in every transaction).
	stmt := func(q string) (*sql.Stmt, error) {
		st := s.stmts[q]
		if st == nil {
			var err error
			if st, err = s.wconn.PrepareContext(ctx, q); err != nil {
				return nil, err
			}
			s.stmts[q] = st
		}
		return st, nil
	}
	begin, err := stmt("BEGIN IMMEDIATE")
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	if _, err := begin.ExecContext(ctx); err != nil {
		return 0, fmt.Errorf("append to %s: begin: %w", s.Name, err)
	}
	committed := false
	defer func() {
		if !committed {
			// A background context: the rollback must happen even if ctx is done.
			s.wconn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	// Rows go in multi-row statements of up to insertChunk records:
	// per-statement overhead, not SQLite, dominates single-row inserts.
	// RETURNING names the rows actually inserted (not already stored).
	added := make([]*trace.Record, 0, len(recs))
	var buf []byte
	var args, ftsArgs []any
	var offs []int
	idx := make(map[recKey]int, insertChunk)
	for start := 0; start < len(recs); start += insertChunk {
		part := recs[start:min(start+insertChunk, len(recs))]
		buf, offs = buf[:0], offs[:0]
		for i := range part {
			offs = append(offs, len(buf))
			buf = part[i].AppendJSON(buf)
		}
		offs = append(offs, len(buf))
		args = args[:0]
		clear(idx)
		for i := range part {
			r := &part[i]
			args = append(args, r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf[offs[i]:offs[i+1]])
			if _, dup := idx[recKey{r.TraceID, r.Seq}]; !dup {
				idx[recKey{r.TraceID, r.Seq}] = i
			}
		}
		ins, err := stmt(multiRow("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES ", 5, len(part), " ON CONFLICT DO NOTHING RETURNING id, trace_id, seq"))
		if err != nil {
			return 0, err
		}
		rows, err := ins.QueryContext(ctx, args...)
		if err != nil {
			return 0, fmt.Errorf("append to %s: records %d-%d: %w", s.Name, start, start+len(part)-1, err)
		}
		ftsArgs = ftsArgs[:0]
		n := 0
		for rows.Next() {
			var id, seq int64
			var tid []byte
			if err := rows.Scan(&id, &tid, &seq); err != nil {
				rows.Close()
				return 0, err
			}
			r := &part[idx[recKey{trace.TraceID(tid), uint64(seq)}]]
			added = append(added, r)
			f := sqlstore.TextFields(r)
			ftsArgs = append(ftsArgs, id, f[0].Text, f[1].Text, f[2].Text, f[3].Text, f[4].Text)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("append to %s: %w", s.Name, err)
		}
		if n == 0 {
			continue
		}
		fts, err := stmt(multiRow("INSERT INTO records_fts (rowid, name, error, input, output, thinking) VALUES ", 6, n, ""))
		if err != nil {
			return 0, err
		}
		if _, err := fts.ExecContext(ctx, ftsArgs...); err != nil {
			return 0, fmt.Errorf("append to %s: index records: %w", s.Name, err)
		}
	}
	commit := func() error {
		st, err := stmt("COMMIT")
		if err == nil {
			_, err = st.ExecContext(ctx)
		}
		if err != nil {
			return fmt.Errorf("append to %s: commit: %w", s.Name, err)
		}
		committed = true
		return nil
	}
	if len(added) == 0 {
		return 0, commit()
	}
	exec := func(ctx context.Context, q string, args ...any) error {
		st, err := stmt(q)
		if err == nil {
			_, err = st.ExecContext(ctx, args...)
		}
		return err
	}
	if err := s.D.ApplyDeltas(ctx, exec, sqlstore.Deltas(added)); err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	if err := commit(); err != nil {
		return 0, err
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

// Close implements store.Store.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	if s.wconn != nil {
		s.wconn.Close()
		s.wconn = nil
	}
	return s.SQL.Close()
}

// insertChunk is the most records one INSERT statement carries.
const insertChunk = 64

type recKey struct {
	id  trace.TraceID
	seq uint64
}

// multiRow returns prefix + rows groups of cols placeholders + suffix.
func multiRow(prefix string, cols, rows int, suffix string) string {
	var b strings.Builder
	b.WriteString(prefix)
	group := "(" + strings.Repeat("?, ", cols-1) + "?)"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(group)
	}
	b.WriteString(suffix)
	return b.String()
}
