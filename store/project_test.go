package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
)

func TestProjectDSN(t *testing.T) {
	for _, c := range []struct{ dsn, project, want, err string }{
		{"/data/loupe.db", "default", "/data/loupe.db", ""},
		{"/data/loupe.db", "", "/data/loupe.db", ""},
		{"/data/loupe.db", "team_a", "/data/loupe.projects/team_a.db", ""},
		{"file:/data/traces.sqlite?_pragma=x", "ops", "file:/data/traces.projects/ops.db?_pragma=x", ""},
		{"./loupe", "ops", "loupe.projects/ops.db", ""},
		{"postgres://u:p@h/db", "team_a", "postgres://u:p@h/db?search_path=public__team_a", ""},
		{"postgres://u@h/db?sslmode=disable&search_path=loupe,public", "b", "postgres://u@h/db?search_path=loupe__b&sslmode=disable", ""},
		{"postgresql://h/db?search_path=%22Odd%22", "b", "postgresql://h/db?search_path=%22Odd__b%22", ""},
		{"postgresql://h/db?search_path=Loupe", "b", "postgresql://h/db?search_path=loupe__b", ""},
		{":memory:", "a", "", "in-memory"},
		{"/data/loupe.db", "Team-A", "", "lower-case letter"},
		{"/data/loupe.db", "../etc", "", "lower-case letter"},
		{"/data/loupe.db", "a_very_long_project_name_that_goes_on_and_on", "", "lower-case letter"},
		{"mysql://h/db", "a", "", "unknown scheme"},
	} {
		got, err := store.ProjectDSN(c.dsn, c.project)
		if c.err != "" {
			if err == nil || !contains(err.Error(), c.err) {
				t.Errorf("ProjectDSN(%q, %q) = %q, %v; want an error saying %q", c.dsn, c.project, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ProjectDSN(%q, %q) = %q, %v; want %q", c.dsn, c.project, got, err, c.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// DropProject removes a SQLite project's database and its logs, and
// nothing else: not the default store, not another project's file,
// whatever name it is asked for.
func TestDropProjectSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := filepath.Join(dir, "loupe.db")
	files := []string{dsn, dsn + "-wal"}
	for _, p := range []string{"team_a", "team_b"} {
		pdsn, err := store.ProjectDSN(dsn, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, pdsn, pdsn+"-wal", pdsn+"-shm")
	}
	if err := os.MkdirAll(filepath.Join(dir, "loupe.projects"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"default", "", "../x", "a;drop", "DEFAULT", "../loupe", "team_a/../team_b", "team_a.db"} {
		if err := store.DropProject(ctx, dsn, name); err == nil {
			t.Errorf("DropProject(%q) = nil", name)
		}
	}
	if err := store.DropProject(ctx, ":memory:", "team_a"); err == nil {
		t.Error("DropProject of an in-memory store = nil")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("a refused drop removed %s: %v", f, err)
		}
	}
	if err := store.DropProject(ctx, dsn, "team_a"); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(f)
		if gone := strings.Contains(f, "team_a"); gone != (err != nil) {
			t.Errorf("%s: after dropping team_a: %v", f, err)
		}
	}
	if err := store.DropProject(ctx, dsn, "team_a"); err != nil {
		t.Fatalf("dropping a project that is gone: %v", err)
	}
}
