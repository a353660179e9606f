// Package sqlite is Loupe's embedded store: one SQLite file, written with
// the pure-Go modernc.org/sqlite driver (no cgo). It registers itself with
// package store as the "sqlite" backend, which store.Open uses for every
// DSN that is not a postgres:// URL.
//
// The database runs in WAL mode with synchronous=NORMAL, so a committed
// Append survives the writing process being killed (only an OS crash or
// power loss can lose the last commits), and readers never block the
// writer. Writes within one process are serialized by a mutex, held for
// the inserts only: records are encoded before it is taken, and the WAL
// is checkpointed by a goroutine of the store beside the appends, not
// inside their commits. Writers in several processes wait on each other
// through busy_timeout. Text search
// uses an FTS5 index (contentless, with deletes) over each record's name,
// error, input, output and thinking.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
	"github.com/loupe-dev/loupe/trace"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

func init() {
	store.Register("sqlite", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
	store.RegisterReadOnly("sqlite", func(ctx context.Context, dsn string) (store.Store, error) { return OpenReadOnly(ctx, dsn) })
}

// SchemaVersion is the newest schema this package knows; migrations[i]
// brings a store from version i to i+1.
const SchemaVersion = 8

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
	// 2: search pages by storage id, so (type, id) replaces the time
	// indexes; the text index becomes one column, rebuilt from the stored
	// records.
	`DROP INDEX records_ts;
	DROP INDEX records_type_ts;
	CREATE INDEX records_type ON records (type, id);
	DROP TABLE records_fts;
	CREATE VIRTUAL TABLE records_fts USING fts5 (body, content='', contentless_delete=1);
	INSERT INTO records_fts (rowid, body)
		SELECT id, concat_ws(char(10), json_extract(doc, '$.name'), json_extract(doc, '$.error'),
			json_extract(doc, '$.input'), json_extract(doc, '$.output'), json_extract(doc, '$.thinking'))
		FROM records;`,
	// 3: the records lost per trace, summed from its dropped markers.
	`ALTER TABLE traces ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;`,
	// 4: the model calls of unknown cost (no price), beside the summed
	// cost of the others. Records stored before have none.
	`ALTER TABLE traces ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE trace_models ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;`,
	// 5: each trace's session and user (trace.RunInfo.Session, User), with
	// an index for each. Traces stored before get them from the tags
	// that OTLP ingest used to write for them ("session:ID", "user:ID",
	// the first in tag order); others have none.
	`ALTER TABLE traces ADD COLUMN session_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE traces ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
	UPDATE traces SET
		session_id = COALESCE((SELECT substr(g.tag, 9) FROM trace_tags g
			WHERE g.trace_id = traces.trace_id AND substr(g.tag, 1, 8) = 'session:' ORDER BY g.tag LIMIT 1), ''),
		user_id = COALESCE((SELECT substr(g.tag, 6) FROM trace_tags g
			WHERE g.trace_id = traces.trace_id AND substr(g.tag, 1, 5) = 'user:' ORDER BY g.tag LIMIT 1), '')
		WHERE trace_id IN (SELECT g.trace_id FROM trace_tags g WHERE substr(g.tag, 1, 8) = 'session:' OR substr(g.tag, 1, 5) = 'user:');
	CREATE INDEX traces_session ON traces (session_id, started) WHERE session_id <> '';
	CREATE INDEX traces_user ON traces (user_id, started) WHERE user_id <> '';`,

	// 6: scores given to traces, spans and sessions, and the kind of
	// every score name (see store.Scorer).
	`CREATE TABLE scores (
		id TEXT PRIMARY KEY,
		trace_id BLOB,
		span_id BLOB,
		session TEXT NOT NULL DEFAULT '',
		name TEXT NOT NULL,
		kind TEXT NOT NULL,
		value REAL NOT NULL DEFAULT 0,
		category TEXT NOT NULL DEFAULT '',
		comment TEXT NOT NULL DEFAULT '',
		source TEXT NOT NULL,
		author TEXT NOT NULL DEFAULT '',
		rule TEXT NOT NULL DEFAULT '',
		ts INTEGER NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX scores_trace ON scores (trace_id, ts) WHERE trace_id IS NOT NULL;
	CREATE INDEX scores_session ON scores (session, ts) WHERE session <> '';
	CREATE INDEX scores_name ON scores (name, ts);
	CREATE INDEX scores_ts ON scores (ts, id);
	CREATE TABLE score_names (name TEXT PRIMARY KEY, kind TEXT NOT NULL) WITHOUT ROWID;`,

	// 7: evaluation datasets (immutable versions) and experiments
	// (store.Datasets).
	sqlstore.DatasetsSQLite,

	// 8: monitors' firings and their webhook deliveries (store.Alerts).
	// A monitor has at most one open firing (resolved IS NULL), which
	// keeps collectors sharing the store from firing it twice.
	`CREATE TABLE alert_firings (
		id TEXT PRIMARY KEY,
		monitor TEXT NOT NULL,
		metric TEXT NOT NULL,
		filter TEXT NOT NULL DEFAULT '',
		started INTEGER NOT NULL,
		resolved INTEGER,
		value REAL NOT NULL,
		threshold REAL NOT NULL,
		window_ns INTEGER NOT NULL,
		resolved_value REAL,
		trace_ids TEXT NOT NULL DEFAULT '',
		UNIQUE (monitor, started)
	);
	CREATE UNIQUE INDEX alert_firings_open ON alert_firings (monitor) WHERE resolved IS NULL;
	CREATE INDEX alert_firings_started ON alert_firings (started);
	CREATE TABLE alert_deliveries (
		firing_id TEXT NOT NULL,
		event TEXT NOT NULL,
		target TEXT NOT NULL,
		attempt INTEGER NOT NULL,
		ts INTEGER NOT NULL,
		status INTEGER NOT NULL,
		ok INTEGER NOT NULL,
		error TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (firing_id, event, target, attempt)
	);`,
}

// Store is a SQLite-backed store.Store. Create one with Open.
type Store struct {
	db    sqlstore.DB
	wmu   sync.Mutex           // serializes this process's write transactions; guards the fields below
	wconn *sql.Conn            // the connection Append writes on, with its statements prepared once
	stmts map[string]*sql.Stmt // prepared on wconn, by SQL text
	ckpt  chan struct{}        // 1-buffered: a commit on wconn wrote to the WAL (nil once closed)
	ckptd chan struct{}        // closed when the checkpointer has stopped
}

var (
	_ store.RecordPager   = (*Store)(nil)
	_ store.SessionLister = (*Store)(nil)
)

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
	s, err := openDB(path, "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.db.SQL.Close()
		return nil, err
	}
	s.wconn, err = s.db.SQL.Conn(ctx)
	if err != nil {
		s.db.SQL.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	s.stmts = map[string]*sql.Stmt{}
	// Appends do not checkpoint the WAL themselves: the checkpointer
	// does, beside them.
	cconn, err := s.db.SQL.Conn(ctx)
	if err == nil {
		_, err = s.wconn.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0")
	}
	if err == nil {
		_, err = cconn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.Itoa(int(walRestartWait.Milliseconds())))
	}
	if err != nil {
		if cconn != nil {
			cconn.Close()
		}
		s.wconn.Close()
		s.db.SQL.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	s.ckpt, s.ckptd = make(chan struct{}, 1), make(chan struct{})
	go s.checkpointer(cconn, s.ckpt, walRestartFrames)
	return s, nil
}

// walRestartFrames is the size of the WAL, in pages, past which the
// checkpointer checkpoints under the write lock, so that the next append
// writes the WAL from its start again: 32 MiB at SQLite's default 4 KiB
// page. Tests lower it before opening a store.
var walRestartFrames int64 = 8192

// walRestartWait is the longest the checkpointer waits, holding the write
// lock, for reads that began before its checkpoint to end.
const walRestartWait = 50 * time.Millisecond

// checkpointer copies the pages that appends write to the WAL into the
// database file (a passive checkpoint), on its own connection, after
// every commit and while the next one is being written: SQLite lets a
// checkpoint run beside a writer, so appends (which do not checkpoint
// themselves: wal_autocheckpoint is off on their connection) never wait
// for one. The WAL only starts over from its beginning when a write
// begins with every page of it copied and no read using it, which a
// checkpoint beside continuous writes rarely leaves; so once the WAL
// holds walRestartFrames pages, the checkpointer checkpoints once more
// holding the write lock (RESTART: it copies what was written since its
// previous pass, then waits up to walRestartWait for the reads that still
// use the WAL), so that the next append starts it over. It stops when
// commits is closed (Close). restartFrames is walRestartFrames when the
// store was opened.
func (s *Store) checkpointer(conn *sql.Conn, commits <-chan struct{}, restartFrames int64) {
	defer close(s.ckptd)
	defer conn.Close()
	ctx := context.Background()
	checkpoint := func(mode string) (frames int64, err error) {
		var busy, ckpted int64
		err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &ckpted)
		return frames, err
	}
	for range commits {
		// An error (another process checkpointing, the disk) leaves the
		// pages in the WAL, where they are as safe; the next commit tries
		// again.
		frames, err := checkpoint("PASSIVE")
		if err != nil || frames < restartFrames {
			continue
		}
		s.wmu.Lock()
		if s.wconn != nil {
			// A read that outlasts the wait leaves the WAL as it is, to be
			// started over after a later commit.
			checkpoint("RESTART")
		}
		s.wmu.Unlock()
	}
}

// OpenReadOnly opens the existing SQLite store at dsn for reading only: it
// creates no file or folder, migrates nothing and takes no write lock, so
// it works on a store whose file or folder the caller may only read. Every
// write returns an error naming the store. When no file exists at the path
// the error wraps store.ErrNoStore. A store with an older schema than this
// package's is refused (a write command migrates it); a newer one is read
// as far as this schema allows.
//
// The connection uses mode=ro. SQLite can read a WAL store read-only only
// when its -shm file exists or can be created; when it cannot (the folder
// is not writable and no writer has the store open, so there is no -shm),
// the store is opened with immutable=1, which reads the file without
// locks. That is safe because a store nobody can write into has no
// concurrent writer whose uncheckpointed WAL could be missed.
func OpenReadOnly(ctx context.Context, dsn string) (*Store, error) {
	path := Path(dsn)
	if path == "" {
		return nil, errors.New("sqlite store: empty path")
	}
	if path == ":memory:" {
		return Open(ctx, dsn)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("sqlite store %s: %w", path, store.ErrNoStore)
	case err != nil:
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	case fi.IsDir():
		return nil, fmt.Errorf("sqlite store %s: is a folder, not a SQLite file (pass the store file, e.g. %s)", path, filepath.Join(path, "loupe.db"))
	}
	s, err := openReadOnly(ctx, path, "&mode=ro")
	if err != nil {
		s2, err2 := openReadOnly(ctx, path, "&mode=ro&immutable=1")
		if err2 != nil {
			return nil, err
		}
		s = s2
	}
	return s, nil
}

func openReadOnly(ctx context.Context, path, params string) (*Store, error) {
	s, err := openDB(path, params+"&_txlock=deferred")
	if err != nil {
		return nil, err
	}
	if err := s.checkSchema(ctx); err != nil {
		s.db.SQL.Close()
		return nil, err
	}
	if s.db.ReadOnly == nil {
		s.db.ReadOnly = fmt.Errorf("sqlite store %s: opened read-only; this command cannot write to it", path)
	}
	return s, nil
}

// openDB opens the connection pool for path with the given extra URI
// parameters (each starting with "&").
func openDB(path, params string) (*Store, error) {
	conn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=cache_size(-65536)" + params
	db, err := sql.Open("sqlite", conn)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	return &Store{db: sqlstore.DB{SQL: db, Name: path, D: sqlstore.Dialect{
		TextFrom:   textFrom,
		DeleteText: deleteText,
	}}}, nil
}

// checkSchema reads the schema version of a store opened read-only.
func (s *Store) checkSchema(ctx context.Context) error {
	var v int
	err := s.db.SQL.QueryRowContext(ctx, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'").Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlite store %s: has no schema version; it is not a Loupe store", s.db.Name)
	case err != nil && strings.Contains(err.Error(), "no such table"):
		return fmt.Errorf("sqlite store %s: not a Loupe store (no meta table)", s.db.Name)
	case err != nil:
		return fmt.Errorf("sqlite store %s: %w (is it a SQLite database you may read?)", s.db.Name, err)
	case v > SchemaVersion:
		s.db.ReadOnly = &store.SchemaVersionError{Store: s.db.Name, Found: v, Known: SchemaVersion}
	case v < SchemaVersion:
		return fmt.Errorf("sqlite store %s: has schema version %d, this loupe reads version %d; upgrade it by running a command that writes (e.g. loupe traces import) as a user who may write it", s.db.Name, v, SchemaVersion)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return s.openError(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
		if isReadOnly(err) {
			return s.openError(err)
		}
		return fmt.Errorf("sqlite store %s: %w (is it a SQLite database?)", s.db.Name, err)
	}
	var v int
	err = tx.QueryRowContext(ctx, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite store %s: read schema version: %w", s.db.Name, err)
	}
	if v > SchemaVersion {
		s.db.ReadOnly = &store.SchemaVersionError{Store: s.db.Name, Found: v, Known: SchemaVersion}
		return nil
	}
	for ; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("sqlite store %s: migrate schema to version %d: %w", s.db.Name, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", SchemaVersion); err != nil {
		return s.openError(err)
	}
	if err := tx.Commit(); err != nil {
		return s.openError(err)
	}
	return nil
}

// isReadOnly reports whether err is SQLite refusing a write because the
// file or its folder is read-only for this process.
func isReadOnly(err error) bool {
	return strings.Contains(err.Error(), "readonly database")
}

// openError names the store in an error met while opening it for writing,
// and says what still works when the store is read-only for this user.
func (s *Store) openError(err error) error {
	if isReadOnly(err) {
		return fmt.Errorf("sqlite store %s: %w: you may only read this store (loupe traces ls, show, search and export can read it)", s.db.Name, err)
	}
	return fmt.Errorf("sqlite store %s: %w", s.db.Name, err)
}

// textFrom matches through the FTS5 index, which drives the query in
// rowid order so that a page stops as soon as it is full. Each term
// becomes an FTS5 string (a phrase of its tokens), so nothing in it is
// FTS5 syntax.
func textFrom(b *sqlstore.Builder, terms []string) (from, cond, id string) {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return "records_fts f JOIN records r ON r.id = f.rowid", "records_fts MATCH " + b.Arg(strings.Join(q, " AND ")), "f.rowid"
}

func deleteText(ctx context.Context, tx *sql.Tx, b *sqlstore.Builder, idsCond string) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM records_fts WHERE rowid IN (SELECT id FROM records WHERE "+idsCond+")", b.Args...)
	return err
}

// Append implements store.Store: one immediate transaction with prepared
// statements; INSERT … ON CONFLICT DO NOTHING makes it idempotent, and only
// the rows actually inserted update the summaries and the text index.
// Records without text (iteration marks) get no text index row.
func (s *Store) Append(ctx context.Context, recs []trace.Record) (int, error) {
	if s.db.ReadOnly != nil {
		return 0, s.db.ReadOnly
	}
	if err := sqlstore.Validate(recs); err != nil {
		return 0, err
	}
	return s.appendValid(ctx, recs)
}

// appendValid is Append once recs are validated. Tests call it directly
// to write what versions before some check could store.
func (s *Store) appendValid(ctx context.Context, recs []trace.Record) (int, error) {
	counts, err := s.insert(ctx, []*group{s.encode(recs)})
	if err != nil {
		return 0, err
	}
	return counts[0], nil
}

// group is records encoded ahead of the write lock (PrepareGroup, and
// Append before it takes the lock): each record's JSON document and its
// text index body as a JSON string, so that the lock is held for the
// inserts only and concurrent requests encode in parallel.
type group struct {
	s    *Store
	recs []trace.Record
	docs []byte // the records' documents, back to back
	text []byte // the records' text index bodies as JSON strings, back to back
	offs []int  // 2 per record: where its document and its text end
}

// Records implements store.Group.
func (g *group) Records() []trace.Record { return g.recs }

// doc and body return record i's encoded document and text index body
// ("" when it has no text: iteration marks, a third of a typical run).
func (g *group) doc(i int) []byte {
	start := 0
	if i > 0 {
		start = g.offs[2*i-2]
	}
	return g.docs[start:g.offs[2*i]]
}

func (g *group) body(i int) []byte {
	start := 0
	if i > 0 {
		start = g.offs[2*i-1]
	}
	return g.text[start:g.offs[2*i+1]]
}

// encode encodes recs, validated, into a group.
func (s *Store) encode(recs []trace.Record) *group {
	g := &group{s: s, recs: recs, offs: make([]int, 0, 2*len(recs))}
	for i := range recs {
		r := &recs[i]
		g.docs = r.AppendJSON(g.docs)
		if body := sqlstore.Body(r); body != "" {
			g.text = trace.AppendString(g.text, body)
		}
		g.offs = append(g.offs, len(g.docs), len(g.text))
	}
	return g
}

// PrepareGroup implements store.GroupAppender: it validates and encodes
// recs without taking the write lock.
func (s *Store) PrepareGroup(recs []trace.Record) (store.Group, error) {
	if err := sqlstore.Validate(recs); err != nil {
		return nil, err
	}
	return s.encode(recs), nil
}

// AppendGroups implements store.GroupAppender: the groups in one
// immediate transaction, each group's new records counted by the group
// of the rows the inserts return.
func (s *Store) AppendGroups(ctx context.Context, groups []store.Group) ([]int, error) {
	if s.db.ReadOnly != nil {
		return nil, s.db.ReadOnly
	}
	gs := make([]*group, len(groups))
	for i, g := range groups {
		sg, ok := g.(*group)
		if !ok || sg.s != s {
			return nil, fmt.Errorf("append to %s: group %d was not prepared by this store's PrepareGroup", s.db.Name, i)
		}
		gs[i] = sg
	}
	return s.insert(ctx, gs)
}

// insert appends the groups in one immediate transaction and returns
// how many records of each were new.
func (s *Store) insert(ctx context.Context, groups []*group) ([]int, error) {
	counts := make([]int, len(groups))
	n := 0
	for _, g := range groups {
		n += len(g.recs)
	}
	if n == 0 {
		return counts, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wconn == nil {
		return nil, fmt.Errorf("append to %s: store is closed", s.db.Name)
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.rollback()
	added, fts, err := tx.insertRecords(groups, n, counts)
	if err != nil {
		return nil, err
	}
	if err := tx.indexText(fts); err != nil {
		return nil, err
	}
	if len(added) > 0 {
		if err := s.db.D.ApplyDeltas(ctx, tx.exec, sqlstore.Deltas(added)); err != nil {
			return nil, fmt.Errorf("append to %s: %w", s.db.Name, err)
		}
	}
	if err := tx.commit(); err != nil {
		return nil, err
	}
	select {
	case s.ckpt <- struct{}{}:
	default: // the checkpointer will see this commit's pages too
	}
	return counts, nil
}

// writeTx is one Append's transaction, driven by hand on the write
// connection so that its statements, prepared once, are reused
// (database/sql's Tx would prepare them again in every transaction). It is
// used with s.wmu held.
type writeTx struct {
	s         *Store
	ctx       context.Context
	committed bool
}

// begin starts an immediate transaction on s.wconn.
func (s *Store) begin(ctx context.Context) (*writeTx, error) {
	tx := &writeTx{s: s, ctx: ctx}
	begin, err := tx.stmt("BEGIN IMMEDIATE")
	if err != nil {
		return nil, fmt.Errorf("append to %s: %w", s.db.Name, err)
	}
	if _, err := begin.ExecContext(ctx); err != nil {
		return nil, fmt.Errorf("append to %s: begin: %w", s.db.Name, err)
	}
	return tx, nil
}

// stmt returns the statement for q prepared on the write connection,
// preparing it the first time.
func (tx *writeTx) stmt(q string) (*sql.Stmt, error) {
	s := tx.s
	st := s.stmts[q]
	if st == nil {
		var err error
		if st, err = s.wconn.PrepareContext(tx.ctx, q); err != nil {
			return nil, err
		}
		s.stmts[q] = st
	}
	return st, nil
}

// exec runs q with args as a prepared statement; it is the
// sqlstore.Execer the summaries are written with.
func (tx *writeTx) exec(ctx context.Context, q string, args ...any) error {
	st, err := tx.stmt(q)
	if err == nil {
		_, err = st.ExecContext(ctx, args...)
	}
	return err
}

// commit commits the transaction.
func (tx *writeTx) commit() error {
	if err := tx.exec(tx.ctx, "COMMIT"); err != nil {
		return fmt.Errorf("append to %s: commit: %w", tx.s.db.Name, err)
	}
	tx.committed = true
	return nil
}

// rollback undoes the transaction unless it was committed.
func (tx *writeTx) rollback() {
	if !tx.committed {
		// A background context: the rollback must happen even if ctx is done.
		tx.s.wconn.ExecContext(context.Background(), "ROLLBACK")
	}
}

// insertRecords inserts the n records of groups in multi-row statements
// of up to insertChunk records (per-statement overhead, not SQLite,
// dominates single-row inserts), counts in counts each group's records
// actually inserted (not already stored, nor earlier in groups) and
// returns them and the text index rows for them.
func (tx *writeTx) insertRecords(groups []*group, n int, counts []int) (added []*trace.Record, fts []textRow, err error) {
	added = make([]*trace.Record, 0, n)
	fts = make([]textRow, 0, n)
	var c chunkBuf
	c.idx = make(map[recKey]int, insertChunk)
	start := 0
	flush := func() error {
		ins, err := tx.stmt(multiRow("INSERT INTO records (trace_id, seq, ts, type, doc) VALUES ", 5, len(c.rows), " ON CONFLICT DO NOTHING RETURNING id, trace_id, seq"))
		if err != nil {
			return err
		}
		rows, err := ins.QueryContext(tx.ctx, c.args...)
		if err != nil {
			return fmt.Errorf("append to %s: records %d-%d: %w", tx.s.db.Name, start, start+len(c.rows)-1, err)
		}
		// RETURNING names the rows actually inserted.
		for rows.Next() {
			var id, seq int64
			var tid []byte
			if err := rows.Scan(&id, &tid, &seq); err != nil {
				rows.Close()
				return err
			}
			row := c.rows[c.idx[recKey{trace.TraceID(tid), uint64(seq)}]]
			g := groups[row.group]
			added = append(added, &g.recs[row.i])
			counts[row.group]++
			if body := g.body(row.i); len(body) > 0 {
				fts = append(fts, textRow{id, body})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("append to %s: %w", tx.s.db.Name, err)
		}
		start += len(c.rows)
		c.reset()
		return nil
	}
	for gi, g := range groups {
		for i := range g.recs {
			c.add(gi, g, i)
			if len(c.rows) == insertChunk {
				if err := flush(); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	if len(c.rows) > 0 {
		if err := flush(); err != nil {
			return nil, nil, err
		}
	}
	return added, fts, nil
}

// chunkBuf holds one insert statement's rows and arguments, reused
// across chunks.
type chunkBuf struct {
	rows []chunkRow
	args []any          // the statement's arguments, 5 per record
	idx  map[recKey]int // the first position in the chunk of each (trace, seq)
}

// chunkRow is a record of a chunk: record i of group number group.
type chunkRow struct{ group, i int }

// add adds record i of g, group number gi, to the chunk.
func (c *chunkBuf) add(gi int, g *group, i int) {
	r := &g.recs[i]
	if _, dup := c.idx[recKey{r.TraceID, r.Seq}]; !dup {
		c.idx[recKey{r.TraceID, r.Seq}] = len(c.rows)
	}
	c.rows = append(c.rows, chunkRow{gi, i})
	c.args = append(c.args, r.TraceID[:], int64(r.Seq), r.Time.UnixNano(), string(r.Type), g.doc(i))
}

// reset empties the chunk.
func (c *chunkBuf) reset() {
	c.rows, c.args = c.rows[:0], c.args[:0]
	clear(c.idx)
}

// textRow is a text index row: a stored record's id and its body as a
// JSON string.
type textRow struct {
	id   int64
	body []byte
}

// maxTextGap is the most ids without a text index row (records without
// text) that one text index statement spans.
const maxTextGap = 256

// indexText inserts the text index rows collected by insertRecords. The
// text index gets them in one statement: FTS5 flushes its pending terms to
// a new segment at every statement boundary, so one statement per batch
// makes one segment, not one per chunk. The statement takes the bodies as
// one JSON array whose element k is the body of id base+k (null for an id
// without text), which SQLite parses once; the ids of a transaction's new
// records follow each other, so one statement holds them all, and a gap of
// more than maxTextGap ids starts another.
func (tx *writeTx) indexText(fts []textRow) error {
	slices.SortFunc(fts, func(a, b textRow) int { return cmp.Compare(a.id, b.id) })
	var arr []byte
	for start := 0; start < len(fts); {
		base := fts[start].id
		arr = append(arr[:0], '[')
		end := start
		for ; end < len(fts) && (end == start || fts[end].id-fts[end-1].id-1 <= maxTextGap); end++ {
			if end > start {
				arr = append(arr, ',')
				for k := fts[end-1].id + 1; k < fts[end].id; k++ {
					arr = append(arr, "null,"...)
				}
			}
			arr = append(arr, fts[end].body...)
		}
		arr = append(arr, ']')
		err := tx.exec(tx.ctx, "INSERT INTO records_fts (rowid, body) SELECT ?2 + key, value FROM json_each(?1) WHERE type = 'text'", string(arr), base)
		if err != nil {
			return fmt.Errorf("append to %s: index records: %w", tx.s.db.Name, err)
		}
		start = end
	}
	return nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ids ...trace.TraceID) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.Delete(ctx, ids...)
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, p store.PrunePolicy) (store.PruneResult, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.Prune(ctx, p)
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.wmu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	if s.wconn != nil {
		s.wconn.Close()
		s.wconn = nil
	}
	ckptd := s.ckptd
	if s.ckpt != nil {
		close(s.ckpt)
		s.ckpt = nil
	}
	s.wmu.Unlock()
	// The checkpointer may be waiting for the write lock; it stops
	// before the pool closes.
	if ckptd != nil {
		<-ckptd
	}
	return s.db.SQL.Close()
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
