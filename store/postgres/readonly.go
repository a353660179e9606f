package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/store/internal/sqlstore"
)

func init() {
	store.RegisterReadOnly("postgres", func(ctx context.Context, dsn string) (store.Store, error) { return OpenReadOnly(ctx, dsn) })
}

// OpenReadOnly connects to the existing store at dsn for reading only: a
// streaming replica (a hot standby), or a role that may only SELECT. It
// creates, migrates and writes nothing: its sessions run with
// default_transaction_read_only on, it makes no day partitions, and every
// write method (Append, Delete, Prune, settings, scores, datasets,
// alerts) returns an error saying the store is open read-only.
//
// The store's schema must be the one this build knows. An older one is
// refused with an error saying to migrate the primary first (opening it
// for writing with this build, as loupe serve --db does, migrates it); a
// replica follows its primary once that is done. A newer one is read as
// far as this schema allows, writes failing with a *store.SchemaVersionError,
// as Open does. A database without a Loupe store in dsn's search_path
// (no meta table, or no schema version in it) is an error wrapping
// store.ErrNoStore.
func OpenReadOnly(ctx context.Context, dsn string) (*Store, error) {
	name := store.Redact(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", name, err)
	}
	// The server refuses any write, whatever path it comes by.
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	s := &Store{db: sqlstore.DB{SQL: db, Name: name, D: dialect}, cfg: cfg, origin: newOrigin()}
	s.closing, s.shut = context.WithCancel(context.Background())
	if err := s.checkSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if s.db.ReadOnly == nil {
		s.db.ReadOnly = fmt.Errorf("postgres store %s: opened read-only (a read replica); writes go to the primary", name)
	}
	return s, nil
}

// checkSchema reads the schema version of a store opened read-only.
func (s *Store) checkSchema(ctx context.Context) error {
	var meta bool
	if err := s.db.SQL.QueryRowContext(ctx, "SELECT to_regclass('meta') IS NOT NULL").Scan(&meta); err != nil {
		return fmt.Errorf("postgres store %s: %w", s.db.Name, err)
	}
	if !meta {
		return fmt.Errorf("postgres store %s: no meta table in the search path: %w", s.db.Name, store.ErrNoStore)
	}
	var v int
	err := s.db.SQL.QueryRowContext(ctx, "SELECT value::integer FROM meta WHERE key = 'schema_version'").Scan(&v)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == insufficientPrivilege {
		return fmt.Errorf("postgres store %s: read the schema version: %w (grant the role SELECT on the store's tables)", s.db.Name, err)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("postgres store %s: the meta table holds no schema version: %w", s.db.Name, store.ErrNoStore)
	case err != nil:
		return fmt.Errorf("postgres store %s: read the schema version: %w", s.db.Name, err)
	case v > SchemaVersion:
		s.db.ReadOnly = &store.SchemaVersionError{Store: s.db.Name, Found: v, Known: SchemaVersion}
	case v < SchemaVersion:
		return fmt.Errorf("postgres store %s: has schema version %d, this loupe reads version %d; migrate the primary first (open it for writing with this loupe, e.g. loupe serve --db PRIMARY), then open the replica again", s.db.Name, v, SchemaVersion)
	}
	return nil
}

// PostgreSQL's SQLSTATEs insufficient_privilege and
// read_only_sql_transaction.
const (
	insufficientPrivilege  = "42501"
	readOnlySQLTransaction = "25006"
)

// readOnlyHint explains err when it is the server refusing a write: Open
// was pointed at a replica (or a read-only session).
func readOnlyHint(err error) error {
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == readOnlySQLTransaction {
		return fmt.Errorf("%w (this server takes no writes: a read replica? Open the primary for writing; a replica serves reads, e.g. loupe serve --read-db)", err)
	}
	return err
}
