// Package postgres is Loupe's shared team store on PostgreSQL, through
// github.com/jackc/pgx/v5. It registers itself with package store as the
// "postgres" backend, which store.Open uses for postgres:// and
// postgresql:// URLs.
//
// Append COPYs a batch straight into the records table, sorted by (trace
// id, seq) and without in-batch duplicates, and updates the summary tables
// from those rows, all in one transaction. Appends stay idempotent by
// trace id + seq: if the COPY hits the unique index (some records are
// already stored, or another writer is storing them), the transaction is
// rolled back and the batch goes the slower way: COPY into a session
// temporary table, then INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING,
// and summaries from the rows actually inserted. Rows are locked in (trace
// id, seq) order, then trace order, so concurrent writers do not deadlock.
// Text search uses a tsvector column (the 'simple' configuration: no
// stemming, as SQLite's FTS5 unicode61) with a GIN index; a BEFORE INSERT
// trigger fills it from the text written to the body column, which it
// then clears, so the text is not stored twice.
//
// Records are partitioned by day (see partitions.go): retention drops the
// partitions older than its cutoff instead of deleting their rows. The
// unique index of a partitioned table must hold the partition key, so the
// index is on (trace id, seq, time); a record sent again with the same
// trace id and seq and another time is caught when its batch takes the
// slower way, not by the COPY. Loupe's recorders and its OTLP mapping
// never give one seq two times: a retry sends the same record.
//
// The tables live in the connection's current schema, so a search_path in
// the DSN (…?search_path=loupe) puts a store in a schema of its own.
//
// A Store tells the other processes of the same store what it commits
// (store.CommitWatcher): the ids and seqs of the records, with NOTIFY,
// 50 ms after the commit (see notify.go).
package postgres

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
const SchemaVersion = 10

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
	// 2: the text index is computed by the server from a write-only body
	// column, so a batch can be COPYed straight into records.
	`ALTER TABLE records ADD COLUMN body text;
	CREATE FUNCTION loupe_records_tsv() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.body IS NOT NULL THEN
			NEW.tsv := to_tsvector('simple', NEW.body);
			NEW.body := NULL;
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER records_tsv BEFORE INSERT ON records FOR EACH ROW EXECUTE FUNCTION loupe_records_tsv();`,
	// 3: the records lost per trace, summed from its dropped markers.
	`ALTER TABLE traces ADD COLUMN lost bigint NOT NULL DEFAULT 0;`,
	// 4: the model calls of unknown cost (no price), beside the summed
	// cost of the others. Records stored before have none.
	`ALTER TABLE traces ADD COLUMN unpriced integer NOT NULL DEFAULT 0;
	ALTER TABLE trace_models ADD COLUMN unpriced integer NOT NULL DEFAULT 0;`,
	// 5: records partitioned by time (ts, a day per partition; see
	// partitions.go), so that retention drops whole partitions. A unique
	// index of a partitioned table must hold the partition key, so a
	// record's identity in the index is (trace id, seq, ts). The rows
	// stored so far move to the default partition, which keeps any time
	// without a partition of its own.
	`ALTER TABLE records RENAME TO records_v4;
	ALTER TABLE records_v4 RENAME CONSTRAINT records_pkey TO records_v4_pkey;
	ALTER TABLE records_v4 RENAME CONSTRAINT records_trace_id_seq_key TO records_v4_trace_id_seq_key;
	ALTER INDEX records_type RENAME TO records_v4_type;
	ALTER INDEX records_tsv RENAME TO records_v4_tsv;
	DROP TRIGGER records_tsv ON records_v4;
	CREATE SEQUENCE records_id_seq_v5;
	CREATE TABLE records (
		id bigint NOT NULL DEFAULT nextval('records_id_seq_v5'),
		trace_id bytea NOT NULL,
		seq bigint NOT NULL,
		ts bigint NOT NULL,
		type text NOT NULL,
		doc bytea NOT NULL,
		tsv tsvector NOT NULL,
		body text,
		PRIMARY KEY (id, ts),
		UNIQUE (trace_id, seq, ts)
	) PARTITION BY RANGE (ts);
	ALTER SEQUENCE records_id_seq_v5 OWNED BY records.id;
	CREATE TABLE records_default PARTITION OF records DEFAULT;
	CREATE INDEX records_type ON records (type, id);
	CREATE INDEX records_tsv ON records USING gin (tsv);
	CREATE TRIGGER records_tsv BEFORE INSERT ON records FOR EACH ROW EXECUTE FUNCTION loupe_records_tsv();
	INSERT INTO records (id, trace_id, seq, ts, type, doc, tsv) SELECT id, trace_id, seq, ts, type, doc, tsv FROM records_v4;
	SELECT setval('records_id_seq_v5', coalesce((SELECT max(id) FROM records_v4), 0) + 1, false);
	DROP TABLE records_v4;`,

	// 6: each trace's session and user (trace.RunInfo.Session, User), with
	// an index for each. Traces stored before get them from the tags
	// that OTLP ingest used to write for them ("session:ID", "user:ID",
	// the first in tag order); others have none.
	`ALTER TABLE traces ADD COLUMN session_id text NOT NULL DEFAULT '';
	ALTER TABLE traces ADD COLUMN user_id text NOT NULL DEFAULT '';
	UPDATE traces SET
		session_id = COALESCE((SELECT substr(g.tag, 9) FROM trace_tags g
			WHERE g.trace_id = traces.trace_id AND substr(g.tag, 1, 8) = 'session:' ORDER BY g.tag LIMIT 1), ''),
		user_id = COALESCE((SELECT substr(g.tag, 6) FROM trace_tags g
			WHERE g.trace_id = traces.trace_id AND substr(g.tag, 1, 5) = 'user:' ORDER BY g.tag LIMIT 1), '')
		WHERE trace_id IN (SELECT g.trace_id FROM trace_tags g WHERE substr(g.tag, 1, 8) = 'session:' OR substr(g.tag, 1, 5) = 'user:');
	CREATE INDEX traces_session ON traces (session_id, started) WHERE session_id <> '';
	CREATE INDEX traces_user ON traces (user_id, started) WHERE user_id <> '';`,

	// 7: scores given to traces, spans and sessions, and the kind of
	// every score name (see store.Scorer).
	`CREATE TABLE scores (
		id text PRIMARY KEY,
		trace_id bytea,
		span_id bytea,
		session text NOT NULL DEFAULT '',
		name text NOT NULL,
		kind text NOT NULL,
		value double precision NOT NULL DEFAULT 0,
		category text NOT NULL DEFAULT '',
		comment text NOT NULL DEFAULT '',
		source text NOT NULL,
		author text NOT NULL DEFAULT '',
		rule text NOT NULL DEFAULT '',
		ts bigint NOT NULL
	);
	CREATE INDEX scores_trace ON scores (trace_id, ts) WHERE trace_id IS NOT NULL;
	CREATE INDEX scores_session ON scores (session, ts) WHERE session <> '';
	CREATE INDEX scores_name ON scores (name, ts);
	CREATE INDEX scores_ts ON scores (ts, id);
	CREATE TABLE score_names (name text PRIMARY KEY, kind text NOT NULL);`,

	// 8: evaluation datasets (immutable versions) and experiments
	// (store.Datasets).
	sqlstore.DatasetsPostgres,

	// 9: monitors' firings and their webhook deliveries (store.Alerts).
	// A monitor has at most one open firing (resolved IS NULL), which
	// keeps collectors sharing the store from firing it twice.
	`CREATE TABLE alert_firings (
		id text PRIMARY KEY,
		monitor text NOT NULL,
		metric text NOT NULL,
		filter text NOT NULL DEFAULT '',
		started bigint NOT NULL,
		resolved bigint,
		value double precision NOT NULL,
		threshold double precision NOT NULL,
		window_ns bigint NOT NULL,
		resolved_value double precision,
		trace_ids text NOT NULL DEFAULT '',
		UNIQUE (monitor, started)
	);
	CREATE UNIQUE INDEX alert_firings_open ON alert_firings (monitor) WHERE resolved IS NULL;
	CREATE INDEX alert_firings_started ON alert_firings (started);
	CREATE TABLE alert_deliveries (
		firing_id text NOT NULL,
		event text NOT NULL,
		target text NOT NULL,
		attempt integer NOT NULL,
		ts bigint NOT NULL,
		status integer NOT NULL,
		ok integer NOT NULL,
		error text NOT NULL DEFAULT '',
		PRIMARY KEY (firing_id, event, target, attempt)
	);`,

	// 10: the index by type also holds each record's trace id and time,
	// so that a search without text chooses its rows from the index
	// alone, reading no row that fails its trace filters, and then the
	// documents of its page by id and time (sqlstore.Dialect.IDsFirst).
	// It replaces records_type, whose columns it starts with. Building it
	// reads every record once, at the first Open of this version. It runs
	// again cleanly on a store whose version was set back by hand (as
	// tests do to replay later migrations), which keeps its indexes.
	`CREATE INDEX IF NOT EXISTS records_type_cover ON records (type, id) INCLUDE (trace_id, ts);
	DROP INDEX IF EXISTS records_type;`,
}

// Store is a PostgreSQL-backed store.Store. Create one with Open.
type Store struct {
	db sqlstore.DB
	// partitionsReady is the start (Unix ns) of the last day partition
	// ensurePartitions made sure of; 0 before it ran.
	partitionsReady atomic.Int64

	// Commit notices (notify.go): the connection settings listeners use,
	// this Store's origin and the schema's channel.
	cfg             *pgx.ConnConfig
	origin, channel string
	silent          bool // sends no notices (benchmarks compare)
	notices         notices
	// closing ends the goroutines (bg) of notices and watchers when the
	// store is closed.
	closing context.Context
	shut    context.CancelFunc
	watchMu sync.Mutex
	closed  bool
	bg      sync.WaitGroup
}

var (
	_ store.RecordPager   = (*Store)(nil)
	_ store.SessionLister = (*Store)(nil)
)

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
	// A collector opens a store per project it serves; an idle project's
	// connections go, so that they do not add up to max_connections.
	db.SetConnMaxIdleTime(time.Minute)
	s := &Store{db: sqlstore.DB{SQL: db, Name: name, D: dialect}, cfg: cfg, origin: newOrigin()}
	s.closing, s.shut = context.WithCancel(context.Background())
	if err := s.ensureSchema(ctx, cfg.RuntimeParams["search_path"]); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	var schema string
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres store %s: current schema: %w", name, err)
	}
	s.channel = channelFor(schema)
	if s.db.ReadOnly == nil {
		if err := s.ensurePartitions(ctx, time.Now()); err != nil {
			db.Close()
			return nil, err
		}
	}
	s.notices.wake = make(chan struct{}, 1)
	s.bg.Add(1)
	go s.notify()
	return s, nil
}

// ensureSchema creates the first schema of searchPath when it does not
// exist (a project's schema, see store.ProjectDSN), so that a store in a
// schema of its own needs no setup by hand. It asks first, because CREATE
// SCHEMA IF NOT EXISTS needs the CREATE privilege on the database even
// when the schema exists.
func (s *Store) ensureSchema(ctx context.Context, searchPath string) error {
	schema := firstSchema(searchPath)
	if schema == "" || schema == "$user" || schema == "public" {
		return nil
	}
	var n int
	if err := s.db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.db.Name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := s.db.SQL.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoteIdent(schema)); err != nil {
		return fmt.Errorf("postgres store %s: create schema %s: %w", s.db.Name, schema, err)
	}
	return nil
}

// firstSchema is the first schema of searchPath as PostgreSQL names it:
// unquoted, and folded to lower case unless it was quoted.
func firstSchema(searchPath string) string {
	schema := strings.TrimSpace(strings.Split(searchPath, ",")[0])
	if len(schema) > 1 && schema[0] == '"' && schema[len(schema)-1] == '"' {
		return strings.ReplaceAll(schema[1:len(schema)-1], `""`, `"`)
	}
	return strings.ToLower(schema) // as PostgreSQL reads an unquoted name
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres store %s: %w", s.db.Name, err)
	}
	defer tx.Rollback()
	// One migrator at a time per database.
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7612001)"); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.db.Name, err)
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)"); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.db.Name, readOnlyHint(err))
	}
	var v int
	err = tx.QueryRowContext(ctx, "SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres store %s: read schema version: %w", s.db.Name, err)
	}
	if v > SchemaVersion {
		s.db.ReadOnly = &store.SchemaVersionError{Store: s.db.Name, Found: v, Known: SchemaVersion}
		return nil
	}
	for ; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("postgres store %s: migrate schema to version %d: %w", s.db.Name, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value", fmt.Sprint(SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// dialect is the sqlstore.Dialect of PostgreSQL.
var dialect = sqlstore.Dialect{Postgres: true, TextMatch: textMatch, IDsFirst: true}

// textMatch ANDs one phraseto_tsquery per term; the terms are parameters.
// A term that had diacritics matches with them too, as the records stored
// before the index folded them (see body) were indexed.
func textMatch(b *sqlstore.Builder, terms, plain []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = "phraseto_tsquery('simple', " + b.Arg(t) + ")"
		if plain[i] != t {
			q[i] = "(" + q[i] + " || phraseto_tsquery('simple', " + b.Arg(plain[i]) + "))"
		}
	}
	return "r.tsv @@ (" + strings.Join(q, " && ") + ")"
}

// maxBody bounds the text indexed per record (a tsvector holds at most 1 MB).
const maxBody = 256 << 10

// body is the text of r that the tsvector indexes: its tokens, lowercase
// runs of letters and digits separated by spaces (sqlstore.TokenText), as
// a query's terms are split and SQLite's index splits text. It is valid
// UTF-8 without NUL bytes (which PostgreSQL text cannot hold).
func body(r *trace.Record) string {
	s := sqlstore.Body(r)
	if len(s) > maxBody {
		s = s[:maxBody]
	}
	return sqlstore.TokenText(strings.ToValidUTF8(s, "\uFFFD"))
}

type key struct {
	id  trace.TraceID
	seq uint64
}

// Append implements store.Store (see the package comment).
func (s *Store) Append(ctx context.Context, recs []trace.Record) (int, error) {
	if s.db.ReadOnly != nil {
		return 0, s.db.ReadOnly
	}
	if err := sqlstore.Validate(recs); err != nil {
		return 0, err
	}
	// As days pass, the next days' partitions. If they cannot be made,
	// the records go to the default partition, which holds any time:
	// nothing is lost, and the next Append tries again.
	_ = s.ensurePartitions(ctx, time.Now())
	return s.appendValid(ctx, recs)
}

// appendValid is Append once recs are validated. Tests call it directly
// to write what versions before some check could store.
func (s *Store) appendValid(ctx context.Context, recs []trace.Record) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	// The batch in (trace id, seq) order, the first of any duplicates kept.
	rows := make([]*trace.Record, len(recs))
	for i := range recs {
		rows[i] = &recs[i]
	}
	slices.SortStableFunc(rows, func(a, b *trace.Record) int {
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	rows = slices.CompactFunc(rows, func(a, b *trace.Record) bool { return a.TraceID == b.TraceID && a.Seq == b.Seq })
	conn, err := s.db.SQL.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.db.Name, err)
	}
	defer conn.Close()
	var added int
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		err := s.copyNew(ctx, pc, rows)
		if err == nil {
			added = len(rows)
			s.committed(rows)
			return nil
		}
		if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != uniqueViolation {
			return err
		}
		fresh, err := s.insertStaged(ctx, pc, rows)
		added = len(fresh)
		if err == nil {
			s.committed(fresh)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.db.Name, err)
	}
	return added, nil
}

// copyNew stores rows, which must all be new, with one COPY into records,
// and adds them to the summaries, in one transaction. If any is already
// stored it fails with a unique violation and stores nothing.
func (s *Store) copyNew(ctx context.Context, pc *pgx.Conn, rows []*trace.Record) error {
	tx, err := pc.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"records"}, copyColumns, copyRows(rows)); err != nil {
		return err
	}
	if err := s.applyDeltas(ctx, tx, rows); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// insertStaged stores those of rows not yet stored: COPY into a session
// temporary table, then INSERT … ON CONFLICT DO NOTHING RETURNING, and adds
// the rows inserted to the summaries, in one transaction.
func (s *Store) insertStaged(ctx context.Context, pc *pgx.Conn, rows []*trace.Record) ([]*trace.Record, error) {
	tx, err := pc.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE IF NOT EXISTS loupe_staging (trace_id bytea, seq bigint, ts bigint, type text, doc bytea, body text) ON COMMIT DELETE ROWS"); err != nil {
		return nil, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"loupe_staging"}, copyColumns, copyRows(rows)); err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	res, err := tx.Query(ctx, "INSERT INTO records (trace_id, seq, ts, type, doc, body) "+
		"SELECT trace_id, seq, ts, type, doc, body FROM loupe_staging "+
		// A record stored with another time is the same record: the
		// unique index holds ts (see migration 5), this holds the rest.
		"WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.trace_id = loupe_staging.trace_id AND r.seq = loupe_staging.seq) "+
		"ORDER BY trace_id, seq ON CONFLICT DO NOTHING RETURNING trace_id, seq")
	if err != nil {
		return nil, err
	}
	fresh := map[key]bool{}
	for res.Next() {
		var id []byte
		var seq int64
		if err := res.Scan(&id, &seq); err != nil {
			res.Close()
			return nil, err
		}
		fresh[key{trace.TraceID(id), uint64(seq)}] = true
	}
	res.Close()
	if err := res.Err(); err != nil {
		return nil, err
	}
	var new []*trace.Record
	for _, r := range rows {
		if fresh[key{r.TraceID, r.Seq}] {
			new = append(new, r)
		}
	}
	if err := s.applyDeltas(ctx, tx, new); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return new, nil
}

// applyDeltas adds the newly stored records to the summary tables, its
// upserts pipelined in one round trip.
func (s *Store) applyDeltas(ctx context.Context, tx pgx.Tx, added []*trace.Record) error {
	if len(added) == 0 {
		return nil
	}
	var batch pgx.Batch
	queue := func(_ context.Context, q string, args ...any) error {
		batch.Queue(q, args...)
		return nil
	}
	if err := s.db.D.ApplyDeltas(ctx, queue, sqlstore.Deltas(added)); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
		return fmt.Errorf("update summaries: %w", err)
	}
	return nil
}

// uniqueViolation is PostgreSQL's SQLSTATE unique_violation.
const uniqueViolation = "23505"

var copyColumns = []string{"trace_id", "seq", "ts", "type", "doc", "body"}

// copyRows is the COPY source for rows; the body column feeds the text
// index (see migration 2).
func copyRows(rows []*trace.Record) pgx.CopyFromSource {
	var buf []byte
	return pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		if cap(buf)-len(buf) < 4096 {
			buf = make([]byte, 0, 64<<10) // earlier rows keep their slices of the old buffer
		}
		start := len(buf)
		buf = r.AppendJSON(buf)
		return []any{r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), buf[start:len(buf):len(buf)], body(r)}, nil
	})
}

// SetOptions implements store.Configurable.
func (s *Store) SetOptions(o store.Options) { s.db.SetOptions(o) }

// Sessions implements store.SessionLister.
func (s *Store) Sessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	return s.db.Sessions(ctx, q)
}

// Trace implements store.Store.
func (s *Store) Trace(ctx context.Context, id trace.TraceID) (*store.Trace, error) {
	return s.db.Trace(ctx, id)
}

// Records implements store.RecordPager.
func (s *Store) Records(ctx context.Context, id trace.TraceID, r store.RecordRange) (store.RecordPage, error) {
	return s.db.Records(ctx, id, r)
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, q store.ListQuery) (store.ListPage, error) {
	return s.db.List(ctx, q)
}

// Search implements store.Store.
func (s *Store) Search(ctx context.Context, q store.Query) (store.SearchPage, error) {
	return s.db.Search(ctx, q)
}

// Export implements store.Store.
func (s *Store) Export(ctx context.Context, f store.Filter) iter.Seq2[trace.Record, error] {
	return s.db.Export(ctx, f)
}

// Aggregate implements store.Store.
func (s *Store) Aggregate(ctx context.Context, since, until time.Time) (store.Aggregates, error) {
	return s.db.Aggregate(ctx, since, until)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ids ...trace.TraceID) (int, error) {
	return s.db.Delete(ctx, ids...)
}

// Prune implements store.Store. With OlderThan, the partitions of
// records wholly older than the cutoff are dropped first (see
// partitions.go); the rest of the expired traces is deleted row by row.
func (s *Store) Prune(ctx context.Context, p store.PrunePolicy) (store.PruneResult, error) {
	if s.db.ReadOnly != nil {
		return store.PruneResult{}, s.db.ReadOnly
	}
	dropped := 0
	if p.OlderThan > 0 {
		now := p.Now
		if now.IsZero() {
			now = time.Now()
		}
		n, err := s.dropPartitions(ctx, now.Add(-p.OlderThan))
		if err != nil {
			return store.PruneResult{}, err
		}
		dropped = n
	}
	res, err := s.db.Prune(ctx, p)
	res.Records += dropped
	return res, err
}

// Close implements store.Store. It sends the last commit notices, and
// stops the commit watchers (WatchCommits) and waits for them.
func (s *Store) Close() error {
	s.watchMu.Lock()
	s.closed = true
	s.watchMu.Unlock()
	s.shut()
	s.bg.Wait()
	return s.db.Close()
}
