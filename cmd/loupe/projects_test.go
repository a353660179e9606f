package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// A project's traces are imported, listed and exported with --project
// (or LOUPE_PROJECT) and stay out of the default project; a project that
// was not made is an error, not a new store.
func TestProjectsCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	mustRun(t, db, "projects", "add", "team_a")
	if _, _, err := run(t, db, "projects", "add", "team_a"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("making team_a twice: %v", err)
	}
	if _, _, err := run(t, db, "projects", "add", "Team-B"); err == nil || !strings.Contains(err.Error(), "lower-case") {
		t.Fatalf("a bad name: %v", err)
	}
	ls := mustRun(t, db, "projects", "ls")
	if !strings.Contains(ls, "default") || !strings.Contains(ls, "team_a") {
		t.Fatalf("projects ls:\n%s", ls)
	}
	file := testrepo.Real(t, realFiles[0])
	mustRun(t, db, "--project", "team_a", "traces", "import", file)
	inA := mustRun(t, db, "--project", "team_a", "traces", "ls")
	inDefault := mustRun(t, db, "traces", "ls")
	if strings.Count(inA, "\n") < 2 || strings.Count(inDefault, "\n") > 1 {
		t.Fatalf("team_a:\n%s\ndefault:\n%s", inA, inDefault)
	}
	t.Setenv("LOUPE_PROJECT", "team_a")
	if got := mustRun(t, db, "traces", "ls"); got != inA {
		t.Fatalf("LOUPE_PROJECT=team_a:\n%s\nwant\n%s", got, inA)
	}
	if _, _, err := run(t, db, "--project", "nosuch", "traces", "ls"); err == nil || !strings.Contains(err.Error(), "loupe projects add nosuch") {
		t.Fatalf("an unknown project: %v", err)
	}
	// Keys live with the default project whatever --project says.
	mustRun(t, db, "keys", "create", "--scope", "read", "--projects", "team_a", "--name", "reader")
	if keys := mustRun(t, db, "keys", "ls"); !strings.Contains(keys, "team_a") || !strings.Contains(keys, "reader") {
		t.Fatalf("keys ls:\n%s", keys)
	}
	if _, _, err := run(t, db, "keys", "create", "--scope", "read", "--projects", "../x"); err == nil {
		t.Fatal("a key for a bad project name was made")
	}
}

// loupe serve serves every project: a key of team_a ingests into
// team_a's store, which the default project's keys cannot read, and the
// server closes the projects it opened on SIGTERM.
func TestServeProjects(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	mustRun(t, db, "projects", "add", "team_a")
	keyA := strings.TrimSpace(mustRun(t, db, "keys", "create", "--scope", "admin", "--projects", "team_a"))
	keyDefault := strings.TrimSpace(mustRun(t, db, "keys", "create", "--scope", "admin"))
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0", "--require-keys", "--grpc-addr", "")
	body, id := serveRecords(0xa1, 20)
	if code, msg := post(t, url, keyA, body); code != 200 {
		t.Fatalf("post as team_a: %d %s", code, msg)
	}
	get := func(key string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/api/v1/traces/"+id.String(), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.Status
	}
	if s := get(keyA); !strings.HasPrefix(s, "200") {
		t.Errorf("team_a's trace as team_a: %s", s)
	}
	if s := get(keyDefault); !strings.HasPrefix(s, "404") {
		t.Errorf("team_a's trace as the default project: %s", s)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("loupe serve after SIGTERM: %v", err)
	}
	if out := mustRun(t, db, "--project", "team_a", "traces", "show", id.String()); !strings.Contains(out, "served") {
		t.Fatalf("team_a's trace after shutdown:\n%s", out)
	}
}
