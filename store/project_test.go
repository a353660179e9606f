package store_test

import (
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
