package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/internal/testrepo"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// httpDo sends a request to a loupe serve with key, naming project, and
// returns the status and body.
func httpDo(t *testing.T, method, url, key, project string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if project != "" {
		req.Header.Set("Loupe-Project", project)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// loupe projects rm asks for --yes, refuses the default project and
// names that are no project, and deletes the project's file and its
// place in the keys; made again, the project is empty.
func TestProjectsRm(t *testing.T) {
	db := filepath.Join(t.TempDir(), "loupe.db")
	mustRun(t, db, "projects", "add", "team_a")
	mustRun(t, db, "projects", "add", "team_b")
	mustRun(t, db, "--project", "team_a", "traces", "import", testrepo.Real(t, realFiles[0]))
	mustRun(t, db, "keys", "create", "--scope", "read", "--projects", "team_a", "--name", "only_a")
	mustRun(t, db, "keys", "create", "--scope", "read", "--projects", "team_a,team_b", "--name", "a_and_b")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"team_a"}, "add --yes"},
		{[]string{"default", "--yes"}, "cannot be deleted"},
		{[]string{"default"}, "cannot be deleted"},
		{[]string{"DEFAULT", "--yes"}, "no project"},
		{[]string{"../x", "--yes"}, "no project"},
		{[]string{"a;drop", "--yes"}, "no project"},
		{[]string{"team_c", "--yes"}, "no project"},
		{[]string{"loupe", "--yes"}, "no project"},
	} {
		if _, _, err := run(t, db, append([]string{"projects", "rm"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("projects rm %s: %v, want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	pdsn, _ := store.ProjectDSN(db, "team_a")
	if _, err := os.Stat(pdsn); err != nil {
		t.Fatalf("a refused rm removed team_a: %v", err)
	}
	_, stderr, err := run(t, db, "projects", "rm", "team_a", "--yes")
	if err != nil || !strings.Contains(stderr, "deleted project team_a") || !strings.Contains(stderr, "revoked") {
		t.Fatalf("projects rm team_a --yes: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(pdsn); !os.IsNotExist(err) {
		t.Errorf("team_a's file after rm: %v", err)
	}
	if ls := mustRun(t, db, "projects", "ls"); strings.Contains(ls, "team_a") || !strings.Contains(ls, "team_b") {
		t.Errorf("projects ls after rm:\n%s", ls)
	}
	keys := mustRun(t, db, "keys", "ls")
	if strings.Contains(keys, "only_a") || strings.Contains(keys, "team_a") || !strings.Contains(keys, "a_and_b") {
		t.Errorf("keys ls after rm:\n%s", keys)
	}
	if _, _, err := run(t, db, "--project", "team_a", "traces", "ls"); err == nil {
		t.Error("traces ls in a deleted project worked")
	}
	mustRun(t, db, "projects", "add", "team_a")
	if out := mustRun(t, db, "--project", "team_a", "traces", "ls"); strings.Count(out, "\n") > 1 {
		t.Errorf("team_a made again is not empty:\n%s", out)
	}
}

// A project of a running loupe serve is deleted through the API while a
// client streams it live: the stream ends cleanly, the project is then
// answered as one that never existed (404 for a key for every project,
// 403 for one of other projects), its file is gone, and the keys that
// named it keep their other projects.
func TestServeDeleteProject(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	mustRun(t, db, "projects", "add", "team_a")
	mustRun(t, db, "projects", "add", "team_b")
	all := strings.TrimSpace(mustRun(t, db, "keys", "create", "--scope", "admin", "--projects", "*"))
	adminA := strings.TrimSpace(mustRun(t, db, "keys", "create", "--scope", "admin", "--projects", "team_a"))
	ab := strings.TrimSpace(mustRun(t, db, "keys", "create", "--scope", "admin", "--projects", "team_a,team_b"))
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0", "--require-keys", "--grpc-addr", "")
	body, id := serveRecords(0xa1, 5)
	if code, msg := httpDo(t, "POST", url+"/v1/records", ab, "team_a", body); code != 200 {
		t.Fatalf("post to team_a: %d %s", code, msg)
	}
	req, _ := http.NewRequest("GET", url+"/api/v1/traces/"+id.String()+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+adminA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream team_a's trace: %v %v", err, resp)
	}
	defer resp.Body.Close()
	end := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		end <- sc.Err()
	}()
	if code, msg := httpDo(t, "DELETE", url+"/api/v1/projects/team_a", adminA, "", nil); code != 403 {
		t.Errorf("DELETE team_a with team_a's admin key: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "DELETE", url+"/api/v1/projects/default", all, "", nil); code != 400 || !strings.Contains(msg, "cannot be deleted") {
		t.Errorf("DELETE default: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "DELETE", url+"/api/v1/projects/team_a", all, "", nil); code != 200 {
		t.Fatalf("DELETE team_a: %d %s", code, msg)
	}
	select {
	case err := <-end:
		if err != nil {
			t.Errorf("the live stream ended with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the live stream is still open")
	}
	code, msg := httpDo(t, "GET", url+"/api/v1/traces/"+id.String(), all, "team_a", nil)
	ncode, nmsg := httpDo(t, "GET", url+"/api/v1/traces/"+id.String(), all, "team_z", nil)
	if code != 404 || ncode != 404 || strings.ReplaceAll(msg, "team_a", "team_z") != nmsg {
		t.Errorf("team_a after the delete: %d %s; a project that never was: %d %s", code, msg, ncode, nmsg)
	}
	if code, msg := httpDo(t, "GET", url+"/api/v1/traces", ab, "team_a", nil); code != 403 {
		t.Errorf("team_a as a key that named it: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "POST", url+"/v1/records", ab, "team_b", body); code != 200 {
		t.Errorf("team_b as a key that named team_a too: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "GET", url+"/api/v1/traces", adminA, "team_a", nil); code != 401 {
		t.Errorf("team_a's own key after the delete: %d %s", code, msg)
	}
	pdsn, _ := store.ProjectDSN(db, "team_a")
	if _, err := os.Stat(pdsn); !os.IsNotExist(err) {
		t.Errorf("team_a's file: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("loupe serve after SIGTERM: %v", err)
	}
}

// With PostgreSQL, loupe projects rm deletes a project that a running
// loupe serve has open: the collector answers it 404 within its
// recheck, and made again the project is served empty.
func TestServeProjectsRmPostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	mustRun(t, dsn, "projects", "add", "team_a")
	all := strings.TrimSpace(mustRun(t, dsn, "keys", "create", "--scope", "admin", "--projects", "*"))
	_, url := startChild(t, "--db", dsn, "serve", "--addr", "127.0.0.1:0", "--require-keys", "--grpc-addr", "")
	body, id := serveRecords(0xa2, 5)
	if code, msg := httpDo(t, "POST", url+"/v1/records", all, "team_a", body); code != 200 {
		t.Fatalf("post to team_a: %d %s", code, msg)
	}
	if _, stderr, err := run(t, dsn, "projects", "rm", "team_a", "--yes"); err != nil {
		t.Fatalf("projects rm: %v\n%s", err, stderr)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, msg := httpDo(t, "GET", url+"/api/v1/traces/"+id.String(), all, "team_a", nil)
		if code == 404 && strings.Contains(msg, "no project") {
			break
		}
		if code != 200 && code != 503 || time.Now().After(deadline) {
			t.Fatalf("team_a after rm: %d %s", code, msg)
		}
	}
	mustRun(t, dsn, "projects", "add", "team_a")
	code, msg := httpDo(t, "GET", url+"/api/v1/traces", all, "team_a", nil)
	var page struct{ Traces []json.RawMessage }
	if code != 200 || json.Unmarshal([]byte(msg), &page) != nil || len(page.Traces) != 0 {
		t.Errorf("team_a made again: %d %s", code, msg)
	}
}

// loupe serve --rules and --monitors take PROJECT=FILE: the project's
// rules grade its traces from the start (and the default project's
// rules do not), its monitors are stored in it, and a project that does
// not exist or a bad file stops loupe serve before it listens, naming
// the place at fault.
func TestServeProjectRules(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "rules.db")
	mustRun(t, db, "projects", "add", "team_a")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rule := "settle: 100ms\nrules:\n  - name: %s\n    assertions:\n      - type: contains\n        value: hello\n"
	defRules := write("default.yaml", fmt.Sprintf(rule, "default-rule"))
	aRules := write("a.yaml", fmt.Sprintf(rule, "team-rule"))
	aMonitors := write("a-monitors.yaml", "monitors:\n  - name: team-errors\n    metric: error_rate\n    window: 5m\n    threshold: 0.2\n")
	badRules := write("bad.yaml", "rules:\n  - name: a\n    sample: 2\n    assertions: [{type: contains, value: x}]\n")
	badMonitors := write("bad-monitors.yaml", "monitors:\n  - name: errors\n    metric: error_rate\n    window: 5m\n    threshold: 0.2\n    resolve: 0.5\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rules", "team_z=" + aRules}, "--rules team_z=" + aRules + ": there is no project team_z"},
		{[]string{"--monitors", "team_z=" + aMonitors}, "--monitors team_z=" + aMonitors + ": there is no project team_z"},
		{[]string{"--rules", "team_a=" + badRules}, badRules + ":3:13: rule \"a\": sample 2 is not in (0, 1]"},
		{[]string{"--monitors", "team_a=" + badMonitors}, "bad-monitors.yaml:6:14: monitor \"errors\": resolve:"},
		{[]string{"--rules", "team_a=" + aRules, "--rules", "team_a=" + defRules}, "project team_a is given two files"},
		{[]string{"--rules", "team_a="}, "no file"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--grpc-addr", ""}, c.args...)
		if _, _, err := run(t, db, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %s: %v, want an error saying %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0", "--grpc-addr", "",
		"--rules", defRules, "--rules", "team_a="+aRules, "--monitors", "team_a="+aMonitors)
	if code, msg := httpDo(t, "GET", url+"/api/v1/monitors", "", "team_a", nil); code != 200 || !strings.Contains(msg, `"team-errors"`) {
		t.Errorf("team_a's monitors: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "GET", url+"/api/v1/monitors", "", "", nil); code != 200 || strings.Contains(msg, `"team-errors"`) {
		t.Errorf("the default project's monitors: %d %s", code, msg)
	}
	helloRun := func(id byte) ([]byte, string) {
		tid, root := trace.TraceID{id, 0x77}, trace.SpanID{id, 1}
		t0 := time.Now().UTC()
		var b []byte
		for _, r := range []trace.Record{
			{V: 1, TraceID: tid, SpanID: root, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "greet"},
			{V: 1, TraceID: tid, SpanID: root, Seq: 2, Time: t0.Add(time.Second), Type: trace.TypeRunEnd, Name: "greet", Status: "success", Output: trace.Text("hello there"), Duration: time.Second},
		} {
			b = append(r.AppendJSON(b), '\n')
		}
		return b, tid.String()
	}
	aBody, aID := helloRun(0xa1)
	dBody, dID := helloRun(0xd1)
	if code, msg := httpDo(t, "POST", url+"/v1/records", "", "team_a", aBody); code != 200 {
		t.Fatalf("post to team_a: %d %s", code, msg)
	}
	if code, msg := httpDo(t, "POST", url+"/v1/records", "", "", dBody); code != 200 {
		t.Fatalf("post to default: %d %s", code, msg)
	}
	type score struct {
		TraceID string `json:"trace_id"`
		Name    string `json:"name"`
	}
	scores := func(project string) []score {
		code, msg := httpDo(t, "GET", url+"/api/v1/scores?limit=1000", "", project, nil)
		var page struct{ Scores []score }
		if code != 200 || json.Unmarshal([]byte(msg), &page) != nil {
			t.Fatalf("scores of %q: %d %s", project, code, msg)
		}
		return page.Scores
	}
	var inA, inDefault []score
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		inA, inDefault = scores("team_a"), scores("")
		if len(inA) > 0 && len(inDefault) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(inA) == 0 || len(inDefault) == 0 {
		t.Fatalf("scores: team_a %v, default %v", inA, inDefault)
	}
	for _, s := range inA {
		if s.TraceID != aID || !strings.HasPrefix(s.Name, "team-rule") {
			t.Errorf("team_a has score %+v", s)
		}
	}
	for _, s := range inDefault {
		if s.TraceID != dID || !strings.HasPrefix(s.Name, "default-rule") {
			t.Errorf("the default project has score %+v", s)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("loupe serve after SIGTERM: %v", err)
	}
}
