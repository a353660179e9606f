package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/store"
)

// TestScoresCommands adds scores to a trace, a span and a session, lists
// and filters them, and removes one, through the command as a person
// runs it.
func TestScoresCommands(t *testing.T) {
	fixedNow(t)
	db := filepath.Join(t.TempDir(), "loupe.db")
	importAll(t, db)
	var page store.ListPage
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json", "--limit", "2")), &page); err != nil || len(page.Traces) < 2 {
		t.Fatalf("traces ls: %v", err)
	}
	id, other := page.Traces[0].ID.String(), page.Traces[1].ID.String()

	out := mustRun(t, db, "scores", "add", id[:8], "thumbs", "true", "--comment", "right answer", "--author", "ann")
	if !strings.HasPrefix(out, "scored "+id[:12]+": thumbs = true (") {
		t.Errorf("add: %q", out)
	}
	// thumbs is boolean now: "-" reads as false.
	mustRun(t, db, "scores", "add", other, "thumbs", "-")
	mustRun(t, db, "scores", "add", id+"/0102030405060708", "helpfulness", "0.4")
	mustRun(t, db, "scores", "add", "--session", "chat-1", "label", "good")

	var got store.Score
	if err := json.Unmarshal([]byte(mustRun(t, db, "scores", "add", other, "helpfulness", "0.9", "--json")), &got); err != nil ||
		got.Kind != store.ScoreNumeric || got.Source != store.SourceHuman || got.Value != 0.9 {
		t.Fatalf("add --json: %+v, %v", got, err)
	}

	table := mustRun(t, db, "scores", "ls")
	for _, want := range []string{"TARGET", "session:chat-1", "right answer", id[:12] + "/0102030405060708", "ann"} {
		if !strings.Contains(table, want) {
			t.Errorf("scores ls lacks %q:\n%s", want, table)
		}
	}
	var sp store.ScorePage
	if err := json.Unmarshal([]byte(mustRun(t, db, "scores", "ls", "--trace", id[:8], "--json")), &sp); err != nil || len(sp.Scores) != 2 {
		t.Fatalf("ls --trace: %+v, %v", sp, err)
	}
	json.Unmarshal([]byte(mustRun(t, db, "scores", "ls", "--name", "thumbs", "--json")), &sp)
	if len(sp.Scores) != 2 {
		t.Errorf("ls --name thumbs: %d scores", len(sp.Scores))
	}
	// The search language and the list filter by score.
	if out := mustRun(t, db, "traces", "search", "score:thumbs=false"); !strings.Contains(out, other[:12]) || strings.Contains(out, id[:12]) {
		t.Errorf("search score:thumbs=false:\n%s", out)
	}

	var listed store.ListPage
	if err := json.Unmarshal([]byte(mustRun(t, db, "traces", "ls", "--json", "--score", "helpfulness>0.5")), &listed); err != nil || len(listed.Traces) != 1 || listed.Traces[0].ID.String() != other {
		t.Errorf("traces ls --score helpfulness>0.5: %+v, %v", listed.Traces, err)
	}
	if _, _, err := run(t, db, "traces", "ls", "--score", "helpfulness"); err == nil || !strings.Contains(err.Error(), "NAME<OP>VALUE") {
		t.Errorf("traces ls --score helpfulness: %v", err)
	}

	if out := mustRun(t, db, "scores", "rm", got.ID, "00000000000000000000000000000000"); out != "deleted 1 scores (1 of the ids are not stored)\n" {
		t.Errorf("rm: %q", out)
	}
	for _, bad := range [][]string{
		{"scores", "add", id, "thumbs", "maybe"},           // not a boolean
		{"scores", "add", id, "helpfulness", "good"},       // not a number
		{"scores", "add", "ffff", "thumbs", "true"},        // no such trace
		{"scores", "add", id + "/xyz", "thumbs", "true"},   // bad span
		{"scores", "add", id, "bad name", "1"},             // bad name
		{"scores", "add", "--session", "s", "a", "b", "c"}, // too many arguments
		{"scores", "ls", "--limit", "5000"},
	} {
		if _, _, err := run(t, db, bad...); err == nil {
			t.Errorf("loupe %s: no error", strings.Join(bad, " "))
		}
	}
}
