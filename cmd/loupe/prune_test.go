package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneDaysAndDryRun: --older-than takes the --since syntax (7d), and
// --dry-run lists exactly what the real prune then removes.
func TestPruneDaysAndDryRun(t *testing.T) {
	fixedNow(t) // 2026-12-01
	db := filepath.Join(t.TempDir(), "loupe.db")
	importAll(t, db)
	before := mustRun(t, db, "traces", "ls", "--json")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--older-than", "300d"}, ""},
		{[]string{"--keep", "9"}, ""},
		{[]string{"--older-than", "7d", "--keep", "3"}, ""},
	} {
		args := append([]string{"traces", "prune", "--dry-run"}, tc.args...)
		dry := mustRun(t, db, args...)
		if !strings.HasPrefix(dry, "would remove (dry run, nothing removed) ") {
			t.Errorf("%v: %q", tc.args, dry)
		}
		if now := mustRun(t, db, "traces", "ls", "--json"); now != before {
			t.Fatalf("%v: --dry-run changed the store", tc.args)
		}
		// The same policy on a copy of the store removes the same traces.
		cp := filepath.Join(t.TempDir(), "copy.db")
		copyFile(t, db, cp, 0o644)
		real := mustRun(t, cp, append([]string{"traces", "prune"}, tc.args...)...)
		if strings.TrimPrefix(dry, "would remove (dry run, nothing removed) ") != strings.TrimPrefix(real, "removed ") {
			t.Errorf("%v: dry run said\n%s\nprune did\n%s", tc.args, dry, real)
		}
		if strings.HasPrefix(real, "removed 0 traces") {
			t.Errorf("%v: the case removes nothing, so it tests nothing", tc.args)
		}
	}

	// 300d and 7200h are the same age.
	a := mustRun(t, db, "traces", "prune", "--dry-run", "--older-than", "300d")
	b := mustRun(t, db, "traces", "prune", "--dry-run", "--older-than", "7200h")
	if a != b {
		t.Errorf("300d and 7200h differ:\n%s\n%s", a, b)
	}
	if _, _, err := run(t, db, "traces", "prune", "--older-than", "7x"); err == nil || !strings.Contains(err.Error(), "7d") {
		t.Errorf("--older-than 7x: %v", err)
	}
	help := mustRun(t, db, "traces", "prune", "--help")
	if !strings.Contains(help, "STARTED") || !strings.Contains(help, "--dry-run") {
		t.Errorf("prune help does not say age is the start time:\n%s", help)
	}
}
