// Package postgres is Loupe's shared team store on PostgreSQL, through
// github.com/jackc/pgx/v5. It registers itself with package store as the
// "postgres" backend, which store.Open uses for postgres:// and
// postgresql:// URLs.
//
// Append copies a batch into a session temporary table with COPY, then
// moves it into the records table with INSERT … SELECT … ON CONFLICT DO
// NOTHING (so appends are idempotent by trace id + seq at COPY speed), and
// updates the summary tables from the rows actually inserted, all in one
// transaction. Rows are locked in (trace id, seq) order, then trace order,
// so concurrent writers do not deadlock. Text search uses a tsvector column
// (the 'simple' configuration: no stemming, as SQLite's FTS5 unicode61)
// with a GIN index.
//
// The tables live in the connection's current schema, so a search_path in
// the DSN (…?search_path=loupe) puts a store in a schema of its own.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/trace"
)

func init() {
	store.Register("postgres", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
}

// SchemaVersion is the newest schema this package knows; migrations[i]
// brings a store from version i to i+1.
const SchemaVersion = 1

var migrations = []string{
	`CREATE TABLE traces (
		trace_id bytea PRIMARY KEY,
		name text NOT NULL DEFAULT '',
		started bigint NOT NULL,
		last_time bigint NOT NULL,
		run_duration bigint,
		status text NOT NULL DEFAULT 'running',
		records integer NOT NULL DEFAULT 0,
		iterations integer NOT NULL DEFAULT 0,
		model_calls integer NOT NULL DEFAULT 0,
		tool_calls integer NOT NULL DEFAULT 0,
		input_tokens bigint NOT NULL DEFAULT 0,
		output_tokens bigint NOT NULL DEFAULT 0,
		cost double precision NOT NULL DEFAULT 0,
		errors integer NOT NULL DEFAULT 0
	);
	CREATE INDEX traces_started ON traces (started, trace_id);
	CREATE INDEX traces_name ON traces (name, started);
	CREATE TABLE trace_models (
		trace_id bytea NOT NULL, model text NOT NULL,
		calls integer NOT NULL, errors integer NOT NULL,
		input_tokens bigint NOT NULL, output_tokens bigint NOT NULL,
		cached_tokens bigint NOT NULL, reasoning_tokens bigint NOT NULL, cost double precision NOT NULL,
		PRIMARY KEY (trace_id, model)
	);
	CREATE INDEX trace_models_model ON trace_models (model, trace_id);
	CREATE TABLE trace_tools (
		trace_id bytea NOT NULL, tool text NOT NULL,
		calls integer NOT NULL, errors integer NOT NULL, total_ns bigint NOT NULL,
		PRIMARY KEY (trace_id, tool)
	);
	CREATE INDEX trace_tools_tool ON trace_tools (tool, trace_id);
	CREATE TABLE trace_tags (
		trace_id bytea NOT NULL, tag text NOT NULL,
		PRIMARY KEY (trace_id, tag)
	);
	CREATE INDEX trace_tags_tag ON trace_tags (tag, trace_id);
	CREATE TABLE records (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		trace_id bytea NOT NULL,
		seq bigint NOT NULL,
		ts bigint NOT NULL,
		type text NOT NULL,
		doc bytea NOT NULL,
		tsv tsvector NOT NULL,
		UNIQUE (trace_id, seq)
	);
	CREATE INDEX records_type ON records (type, id);
	CREATE INDEX records_tsv ON records USING gin (tsv);`,
}

// Store is a PostgreSQL-backed store.Store. Create one with Open.
type Store struct {
	sqlstore.DB
}

var _ store.Store = (*Store)(nil)

// Open connects to the PostgreSQL database at dsn (a postgres:// URL) and
// applies pending migrations. A database with a newer schema than
// SchemaVersion is opened read-only: writes return a
// *store.SchemaVersionError.
func Open(ctx context.Context, dsn string) (*Store, error) {
	name := store.Redact(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", name, err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	s := &Store{DB: sqlstore.DB{SQL: db, Name: name, D: sqlstore.Dialect{Postgres: true, TextMatch: textMatch}}}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres store %s: %w", s.Name, err)
	}
	defer tx.Rollback()
	// One migrator at a time per database.
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7612001)"); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.Name, err)
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)"); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.Name, err)
	}
	var v int
	err = tx.QueryRowContext(ctx, "SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres store %s: read schema version: %w", s.Name, err)
	}
	if v > SchemaVersion {
		s.ReadOnly = &store.SchemaVersionError{Store: s.Name, Found: v, Known: SchemaVersion}
		return nil
	}
	for ; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("postgres store %s: migrate schema to version %d: %w", s.Name, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value", fmt.Sprint(SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// textMatch ANDs one phraseto_tsquery per term; the terms are parameters.
func textMatch(b *sqlstore.Builder, terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = "phraseto_tsquery('simple', " + b.Arg(t) + ")"
	}
	return "r.tsv @@ (" + strings.Join(q, " && ") + ")"
}

// maxBody bounds the text indexed per record (a tsvector holds at most 1 MB).
const maxBody = 256 << 10

// body is the text of r that the tsvector indexes, as valid UTF-8 without
// NUL bytes (which PostgreSQL text cannot hold).
func body(r *trace.Record) string {
	var b strings.Builder
	for _, f := range sqlstore.TextFields(r) {
		if f.Text != "" {
			b.WriteString(f.Text)
			b.WriteByte('\n')
		}
	}
	s := b.String()
	if len(s) > maxBody {
		s = s[:maxBody]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", " ")
}

type key struct {
	id  trace.TraceID
	seq uint64
}

// Append implements store.Store (see the package comment).
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
	conn, err := s.SQL.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	defer conn.Close()
	var added int
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		tx, err := pc.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS loupe_staging (trace_id bytea, seq bigint, ts bigint, type text, doc bytea, body text) ON COMMIT DELETE ROWS"); err != nil {
			return err
		}
		var buf []byte
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"loupe_staging"}, []string{"trace_id", "seq", "ts", "type", "doc", "body"},
			pgx.CopyFromSlice(len(recs), func(i int) ([]any, error) {
				r := &recs[i]
				start := len(buf)
				buf = r.AppendJSON(buf)
				return []any{r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf[start:len(buf):len(buf)], body(r)}, nil
			}))
		if err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		rows, err := tx.Query(ctx, "INSERT INTO records (trace_id, seq, ts, type, doc, tsv) "+
			"SELECT trace_id, seq, ts, type, doc, to_tsvector('simple', body) FROM loupe_staging ORDER BY trace_id, seq "+
			"ON CONFLICT (trace_id, seq) DO NOTHING RETURNING trace_id, seq")
		if err != nil {
			return err
		}
		fresh := map[key]bool{}
		for rows.Next() {
			var id []byte
			var seq int64
			if err := rows.Scan(&id, &seq); err != nil {
				rows.Close()
				return err
			}
			fresh[key{trace.TraceID(id), uint64(seq)}] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var new []*trace.Record
		for i := range recs {
			k := key{recs[i].TraceID, recs[i].Seq}
			if fresh[k] {
				delete(fresh, k) // a record twice in one batch counts once
				new = append(new, &recs[i])
			}
		}
		if len(new) > 0 {
			exec := func(ctx context.Context, q string, args ...any) error {
				_, err := tx.Exec(ctx, q, args...)
				return err
			}
			if err := s.D.ApplyDeltas(ctx, exec, sqlstore.Deltas(new)); err != nil {
				return err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		added = len(new)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.Name, err)
	}
	return added, nil
}
