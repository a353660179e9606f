package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loupe-dev/loupe/store"
)

func init() {
	store.RegisterDropper("postgres", DropSchema)
}

// DropSchema deletes the schema that dsn's search_path names first, with
// every table in it (DROP SCHEMA … CASCADE): a project's store, as
// store.DropProject asks for it. Only a project's schema may go: a
// search_path naming none, public, $user, or a schema whose name has no
// "__" (store.ProjectDSN's SCHEMA__PROJECT) is an error, and the name is
// quoted as an identifier, never spliced into the statement. A schema that
// does not exist is no error. The statement waits at most 10 s for the
// locks of other sessions' transactions on the schema's tables (another
// collector serving the project), then fails, and may be retried; those
// collectors' queries on the project fail once it is gone.
func DropSchema(ctx context.Context, dsn string) error {
	name := store.Redact(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("postgres store %s: %w", name, err)
	}
	schema := firstSchema(cfg.RuntimeParams["search_path"])
	if schema == "" || schema == "public" || schema == "$user" || !strings.Contains(schema, "__") || strings.HasPrefix(schema, "pg_") {
		return fmt.Errorf("postgres store %s: %q is not a project's schema (SCHEMA__PROJECT); nothing was dropped", name, schema)
	}
	delete(cfg.RuntimeParams, "search_path") // the schema is named in the statement; this session needs none
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres store %s: %w", name, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '10s'"); err != nil {
		return fmt.Errorf("postgres store %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE"); err != nil {
		return fmt.Errorf("postgres store %s: drop schema %s: %w", name, schema, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres store %s: drop schema %s: %w", name, schema, err)
	}
	return nil
}
