package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Datasets and experiments (store.Datasets), in the tables the backends
// create with DatasetsSQLite and DatasetsPostgres.

// DatasetsSQLite is the SQLite migration that creates the tables of
// store.Datasets.
const DatasetsSQLite = `CREATE TABLE dataset_versions (
		name TEXT NOT NULL, version INTEGER NOT NULL, created INTEGER NOT NULL,
		note TEXT NOT NULL DEFAULT '', case_count INTEGER NOT NULL, cases BLOB NOT NULL,
		PRIMARY KEY (name, version)
	) WITHOUT ROWID;
	CREATE TABLE experiments (
		name TEXT PRIMARY KEY, dataset TEXT NOT NULL, version INTEGER NOT NULL,
		created INTEGER NOT NULL, summary BLOB, doc BLOB NOT NULL
	) WITHOUT ROWID;
	CREATE INDEX experiments_created ON experiments (created);
	CREATE INDEX experiments_dataset ON experiments (dataset, created);`

// DatasetsPostgres is the PostgreSQL migration that creates the tables of
// store.Datasets.
const DatasetsPostgres = `CREATE TABLE dataset_versions (
		name text NOT NULL, version integer NOT NULL, created bigint NOT NULL,
		note text NOT NULL DEFAULT '', case_count integer NOT NULL, cases bytea NOT NULL,
		PRIMARY KEY (name, version)
	);
	CREATE TABLE experiments (
		name text PRIMARY KEY, dataset text NOT NULL, version integer NOT NULL,
		created bigint NOT NULL, summary bytea, doc bytea NOT NULL
	);
	CREATE INDEX experiments_created ON experiments (created);
	CREATE INDEX experiments_dataset ON experiments (dataset, created);`

func (db *DB) dsErr(what string, err error) error {
	return fmt.Errorf("store %s: %s: %w", db.Name, what, err)
}

// PutDatasetVersion implements store.Datasets. The new version's row is
// inserted with ON CONFLICT DO NOTHING, so of two writers that started
// from the same base exactly one wins, without a transaction.
func (db *DB) PutDatasetVersion(ctx context.Context, base int, v store.DatasetVersion) (store.DatasetVersion, error) {
	if db.ReadOnly != nil {
		return v, db.ReadOnly
	}
	if err := store.CheckName("dataset", v.Name); err != nil {
		return v, err
	}
	if len(v.Cases) > store.MaxDatasetBytes {
		return v, fmt.Errorf("dataset %s: %d bytes of cases, more than the limit of %d", v.Name, len(v.Cases), store.MaxDatasetBytes)
	}
	if len(v.Cases) == 0 {
		v.Cases = []byte("[]")
	}
	var latest int
	if err := db.SQL.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM dataset_versions WHERE name = "+db.ph(1), v.Name).Scan(&latest); err != nil {
		return v, db.dsErr("reading dataset "+v.Name, err)
	}
	if latest != base {
		return v, fmt.Errorf("dataset %s: the change was made to version %d but the newest is %d: %w; reload it and apply the change again", v.Name, base, latest, store.ErrConflict)
	}
	v.Version = base + 1
	v.Created = time.Now().UTC()
	res, err := db.SQL.ExecContext(ctx, "INSERT INTO dataset_versions (name, version, created, note, case_count, cases) VALUES ("+
		db.ph(1)+", "+db.ph(2)+", "+db.ph(3)+", "+db.ph(4)+", "+db.ph(5)+", "+db.ph(6)+") ON CONFLICT DO NOTHING",
		v.Name, v.Version, v.Created.UnixNano(), v.Note, v.CaseCount, []byte(v.Cases))
	if err != nil {
		return v, db.dsErr("writing dataset "+v.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return v, fmt.Errorf("dataset %s: version %d was added meanwhile: %w; reload it and apply the change again", v.Name, v.Version, store.ErrConflict)
	}
	return v, nil
}

const dsCols = "name, version, created, note, case_count"

func scanVersion(sc interface{ Scan(...any) error }, withCases bool) (store.DatasetVersion, error) {
	var v store.DatasetVersion
	var created int64
	dst := []any{&v.Name, &v.Version, &created, &v.Note, &v.CaseCount}
	var cases []byte
	if withCases {
		dst = append(dst, &cases)
	}
	if err := sc.Scan(dst...); err != nil {
		return v, err
	}
	v.Created = time.Unix(0, created).UTC()
	if withCases {
		v.Cases = cases
	}
	return v, nil
}

// DatasetVersion implements store.Datasets.
func (db *DB) DatasetVersion(ctx context.Context, name string, version int) (store.DatasetVersion, error) {
	q := "SELECT " + dsCols + ", cases FROM dataset_versions WHERE name = " + db.ph(1)
	args := []any{name}
	if version > 0 {
		q += " AND version = " + db.ph(2)
		args = append(args, version)
	} else {
		q += " ORDER BY version DESC LIMIT 1"
	}
	v, err := scanVersion(db.SQL.QueryRowContext(ctx, q, args...), true)
	if errors.Is(err, sql.ErrNoRows) {
		if version > 0 {
			return v, fmt.Errorf("dataset %s@%d: %w", name, version, store.ErrNotFound)
		}
		return v, fmt.Errorf("dataset %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return v, db.dsErr("reading dataset "+name, err)
	}
	return v, nil
}

func (db *DB) versions(ctx context.Context, q string, args ...any) ([]store.DatasetVersion, error) {
	rows, err := db.SQL.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, db.dsErr("listing datasets", err)
	}
	defer rows.Close()
	var out []store.DatasetVersion
	for rows.Next() {
		v, err := scanVersion(rows, false)
		if err != nil {
			return nil, db.dsErr("listing datasets", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, db.dsErr("listing datasets", err)
	}
	return out, nil
}

// DatasetVersions implements store.Datasets.
func (db *DB) DatasetVersions(ctx context.Context, name string) ([]store.DatasetVersion, error) {
	out, err := db.versions(ctx, "SELECT "+dsCols+" FROM dataset_versions WHERE name = "+db.ph(1)+" ORDER BY version DESC", name)
	if err == nil && len(out) == 0 {
		return nil, fmt.Errorf("dataset %s: %w", name, store.ErrNotFound)
	}
	return out, err
}

// ListDatasets implements store.Datasets.
func (db *DB) ListDatasets(ctx context.Context) ([]store.DatasetVersion, error) {
	return db.versions(ctx, "SELECT "+dsCols+" FROM dataset_versions d WHERE version = "+
		"(SELECT MAX(version) FROM dataset_versions m WHERE m.name = d.name) ORDER BY name")
}

// DeleteDataset implements store.Datasets.
func (db *DB) DeleteDataset(ctx context.Context, name string) (bool, error) {
	if db.ReadOnly != nil {
		return false, db.ReadOnly
	}
	res, err := db.SQL.ExecContext(ctx, "DELETE FROM dataset_versions WHERE name = "+db.ph(1), name)
	if err != nil {
		return false, db.dsErr("deleting dataset "+name, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// PutExperiment implements store.Datasets.
func (db *DB) PutExperiment(ctx context.Context, e store.Experiment) error {
	if db.ReadOnly != nil {
		return db.ReadOnly
	}
	if err := store.CheckName("experiment", e.Name); err != nil {
		return err
	}
	if len(e.Doc)+len(e.Summary) > store.MaxExperimentBytes {
		return fmt.Errorf("experiment %s: %d bytes, more than the limit of %d", e.Name, len(e.Doc)+len(e.Summary), store.MaxExperimentBytes)
	}
	if e.Created.IsZero() {
		e.Created = time.Now().UTC()
	}
	if len(e.Doc) == 0 {
		e.Doc = []byte("{}")
	}
	res, err := db.SQL.ExecContext(ctx, "INSERT INTO experiments (name, dataset, version, created, summary, doc) VALUES ("+
		db.ph(1)+", "+db.ph(2)+", "+db.ph(3)+", "+db.ph(4)+", "+db.ph(5)+", "+db.ph(6)+") ON CONFLICT DO NOTHING",
		e.Name, e.Dataset, e.Version, e.Created.UnixNano(), []byte(e.Summary), []byte(e.Doc))
	if err != nil {
		return db.dsErr("writing experiment "+e.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("experiment %s already exists: %w; choose another name", e.Name, store.ErrConflict)
	}
	return nil
}

func scanExperiment(sc interface{ Scan(...any) error }, withDoc bool) (store.Experiment, error) {
	var e store.Experiment
	var created int64
	var summary, doc []byte
	dst := []any{&e.Name, &e.Dataset, &e.Version, &created, &summary}
	if withDoc {
		dst = append(dst, &doc)
	}
	if err := sc.Scan(dst...); err != nil {
		return e, err
	}
	e.Created = time.Unix(0, created).UTC()
	if len(summary) > 0 {
		e.Summary = summary
	}
	if withDoc {
		e.Doc = doc
	}
	return e, nil
}

const expCols = "name, dataset, version, created, summary"

// Experiment implements store.Datasets.
func (db *DB) Experiment(ctx context.Context, name string) (store.Experiment, error) {
	e, err := scanExperiment(db.SQL.QueryRowContext(ctx, "SELECT "+expCols+", doc FROM experiments WHERE name = "+db.ph(1), name), true)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("experiment %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return e, db.dsErr("reading experiment "+name, err)
	}
	return e, nil
}

// ListExperiments implements store.Datasets.
func (db *DB) ListExperiments(ctx context.Context, dataset string) ([]store.Experiment, error) {
	q := "SELECT " + expCols + " FROM experiments"
	var args []any
	if dataset != "" {
		q += " WHERE dataset = " + db.ph(1)
		args = append(args, dataset)
	}
	q += " ORDER BY created DESC, name"
	rows, err := db.SQL.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, db.dsErr("listing experiments", err)
	}
	defer rows.Close()
	var out []store.Experiment
	for rows.Next() {
		e, err := scanExperiment(rows, false)
		if err != nil {
			return nil, db.dsErr("listing experiments", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, db.dsErr("listing experiments", err)
	}
	return out, nil
}

// DeleteExperiment implements store.Datasets.
func (db *DB) DeleteExperiment(ctx context.Context, name string) (bool, error) {
	if db.ReadOnly != nil {
		return false, db.ReadOnly
	}
	res, err := db.SQL.ExecContext(ctx, "DELETE FROM experiments WHERE name = "+db.ph(1), name)
	if err != nil {
		return false, db.dsErr("deleting experiment "+name, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
