package sqlstore

import (
	"context"
	"fmt"
	"strings"
)

// The settings kept in the meta table beside schema_version (see
// store.Settings). Keys of settings never start with "schema", so they
// cannot touch the schema version.

func (db *DB) ph(n int) string {
	if db.D.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func settingKey(key string) error {
	if key == "" || strings.HasPrefix(key, "schema") {
		return fmt.Errorf("setting key %q: must be non-empty and not start with \"schema\"", key)
	}
	return nil
}

// Settings implements store.Settings.
func (db *DB) Settings(ctx context.Context, prefix string) (map[string]string, error) {
	// Prefix match without LIKE, whose wildcards the prefix could contain.
	rows, err := db.SQL.QueryContext(ctx, "SELECT key, value FROM meta WHERE substr(key, 1, "+db.ph(1)+") = "+db.ph(2), len(prefix), prefix)
	if err != nil {
		return nil, fmt.Errorf("store %s: reading settings: %w", db.Name, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("store %s: reading settings: %w", db.Name, err)
		}
		if k != "schema_version" {
			out[k] = v
		}
	}
	return out, rows.Err()
}

// PutSetting implements store.Settings.
func (db *DB) PutSetting(ctx context.Context, key, value string) error {
	if db.ReadOnly != nil {
		return db.ReadOnly
	}
	if err := settingKey(key); err != nil {
		return err
	}
	_, err := db.SQL.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES ("+db.ph(1)+", "+db.ph(2)+") ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value)
	if err != nil {
		return fmt.Errorf("store %s: writing setting %s: %w", db.Name, key, err)
	}
	return nil
}

// DeleteSetting implements store.Settings.
func (db *DB) DeleteSetting(ctx context.Context, key string) (bool, error) {
	if db.ReadOnly != nil {
		return false, db.ReadOnly
	}
	if err := settingKey(key); err != nil {
		return false, err
	}
	res, err := db.SQL.ExecContext(ctx, "DELETE FROM meta WHERE key = "+db.ph(1), key)
	if err != nil {
		return false, fmt.Errorf("store %s: deleting setting %s: %w", db.Name, key, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
