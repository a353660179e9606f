package server

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/store"
)

func TestDeleteProjectSQLite(t *testing.T) {
	pe := newProjectsEnv(t, Options{})
	testDeleteProject(t, pe, func() bool {
		pdsn, _ := store.ProjectDSN(pe.dsn, "b")
		_, err := os.Stat(pdsn)
		return err == nil
	})
}

func TestDeleteProjectPostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	pe := newProjectsEnvAt(t, Options{}, dsn)
	pdsn, _ := store.ProjectDSN(dsn, "b")
	u, _ := url.Parse(pdsn)
	schema := u.Query().Get("search_path")
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testDeleteProject(t, pe, func() bool {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// testDeleteProject deletes project b of pe while a client streams it
// live and another ingests into it: the stream ends cleanly, every
// request gets an answer (never a 500), and afterwards b is answered as a
// project that never existed, its keys lose it, its store is gone
// (exists), and made again it is empty. Names that are not b, or are the
// default project, delete nothing.
func testDeleteProject(t *testing.T, pe *projectsEnv, exists func() bool) {
	if code, b := pe.as("ingestB", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xb1, "bravo"))); code != 200 {
		t.Fatalf("ingest b: %d %s", code, b)
	}
	bID := run(0xb1, "")[0].TraceID.String()
	if !exists() {
		t.Fatal("b's store is not where DropProject looks")
	}

	// Who may not delete, and what is not a project.
	for _, c := range []struct {
		key, name string
		code      int
	}{
		{"readB", "b", 403}, {"ingestB", "b", 403}, {"adminB", "b", 403}, {"default", "b", 403}, {"ab", "b", 403},
		{"all", "default", 400},
		{"all", "DEFAULT", 404}, {"all", "..%2Fx", 404}, {"all", "a;drop", 404}, {"all", "a%3Bdrop", 404},
		{"all", "b%22%20CASCADE", 404}, {"all", "B", 404}, {"all", "nosuch", 404}, {"all", "b.db", 404},
		{"all", strings.Repeat("b", 300), 404},
	} {
		if code, b := pe.as(c.key, "DELETE", "/api/v1/projects/"+c.name, "", nil); code != c.code {
			t.Errorf("DELETE project %q as %s: %d %s, want %d", c.name, c.key, code, b, c.code)
		}
	}
	if code, b := pe.as("readB", "GET", "/api/v1/traces/"+bID, "", nil); code != 200 {
		t.Fatalf("b's trace after the refused deletes: %d %s", code, b)
	}
	if !exists() {
		t.Fatal("a refused delete removed b's store")
	}

	// b streams live while it is deleted, and a sender keeps posting.
	pe.key = pe.keys["readB"]
	sse := pe.stream(t, "/api/v1/stream", "")
	pe.key = ""
	if code, b := pe.as("ingestB", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xb2, "bravo-live"))); code != 200 {
		t.Fatalf("ingest b: %d %s", code, b)
	}
	for ev := sse.next(); !strings.Contains(ev.data, run(0xb2, "")[0].TraceID.String()); ev = sse.next() {
	}
	streamEnd := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(sse.resp.Body)
		for sc.Scan() {
		}
		streamEnd <- sc.Err()
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 2 {
		wg.Go(func() {
			for n := byte(0); ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", pe.ts.URL+"/v1/records", strings.NewReader(string(ndjson(run(0xc0+byte(i)*0x10+n%16, "during")))))
				req.Header.Set("Content-Type", "application/x-ndjson")
				req.Header.Set("Authorization", "Bearer "+pe.keys["all"])
				req.Header.Set(ProjectHeader, "b")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("ingest during the delete: %v", err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	// waitFor waits until a request was answered code (a hang guard of
	// 10 s, not a timing claim).
	waitFor := func(code int) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			n := codes[code]
			mu.Unlock()
			if n > 0 {
				return
			}
		}
	}
	waitFor(200) // the senders are sending
	code, body := pe.as("all", "DELETE", "/api/v1/projects/b", "", nil)
	if code != 200 {
		t.Fatalf("DELETE b: %d %s", code, body)
	}
	var del ProjectDeletion
	if err := json.Unmarshal(body, &del); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-streamEnd:
		if err != nil {
			t.Errorf("b's live stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's live stream is still open after the delete")
	}
	waitFor(404) // and go on after the delete
	close(stop)
	wg.Wait()
	for c, n := range codes {
		if c != 200 && c != 404 {
			t.Errorf("%d ingest requests during the delete were answered %d", n, c)
		}
	}
	if codes[404] == 0 {
		t.Errorf("no request after the delete was answered 404: %v", codes)
	}

	// b is gone: answered as a project that never existed.
	if exists() {
		t.Error("b's store is still there")
	}
	for _, c := range []struct {
		key  string
		code int
	}{{"all", 404}, {"ab", 403}, {"readA", 403}, {"readB", 401}, {"ingestB", 401}} {
		code, got := pe.as(c.key, "GET", "/api/v1/traces", "", nil, ProjectHeader, "b")
		ncode, never := pe.as(c.key, "GET", "/api/v1/traces", "", nil, ProjectHeader, "never")
		if code != c.code || c.code != 401 && (ncode != code || strings.ReplaceAll(string(got), `\"b\"`, `\"never\"`) != string(never)) {
			t.Errorf("GET traces in b as %s: %d %s; a project that never existed: %d %s; want %d", c.key, code, got, ncode, never, c.code)
		}
	}
	if code, b := pe.as("all", "DELETE", "/api/v1/projects/b", "", nil); code != 404 {
		t.Errorf("deleting b again: %d %s", code, b)
	}
	keys, err := Keys(context.Background(), pe.st)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Key{}
	for _, k := range keys {
		byName[k.Name] = k
	}
	for _, n := range []string{"adminB", "readB", "ingestB"} {
		if k, ok := byName[n]; ok {
			t.Errorf("key %s (b's alone) is kept: %+v", n, k)
		}
	}
	if ab := byName["ab"]; len(ab.Projects) != 1 || ab.Projects[0] != "a" || len(del.KeysChanged) != 1 || del.KeysChanged[0] != ab.ID || len(del.KeysRevoked) != 3 {
		t.Errorf("key ab after deleting b: %+v; deletion %+v", ab, del)
	}
	if code, b := pe.as("ab", "POST", "/v1/records", "application/x-ndjson", ndjson(run(0xa5, "alpha"))); code != 200 {
		t.Errorf("key ab ingesting into a: %d %s", code, b)
	}
	if code, b := pe.as("all", "GET", "/api/v1/projects", "", nil); code != 200 || strings.Contains(string(b), `"b"`) {
		t.Errorf("projects after deleting b: %d %s", code, b)
	}

	// Made again, b is empty and has no keys of its own.
	if code, b := pe.as("all", "POST", "/api/v1/projects", "application/json", []byte(`{"name":"b"}`)); code != 201 {
		t.Fatalf("making b again: %d %s", code, b)
	}
	code, b := pe.as("all", "GET", "/api/v1/traces", "", nil, ProjectHeader, "b")
	var page struct {
		Traces []json.RawMessage `json:"traces"`
	}
	if code != 200 || json.Unmarshal(b, &page) != nil || len(page.Traces) != 0 {
		t.Errorf("b made again: %d %s", code, b)
	}
	if code, b := pe.as("ab", "GET", "/api/v1/traces", "", nil, ProjectHeader, "b"); code != 403 {
		t.Errorf("key ab on b made again: %d %s", code, b)
	}
	// a and the default project are untouched.
	if code, b := pe.as("readA", "GET", "/api/v1/traces/"+run(0xa5, "")[0].TraceID.String(), "", nil); code != 200 {
		t.Errorf("a's trace: %d %s", code, b)
	}
	if _, err := DeleteProject(context.Background(), pe.st, "default", func(context.Context) error { return errors.New("called") }); !errors.Is(err, ErrDefaultProject) {
		t.Errorf("DeleteProject(default): %v", err)
	}
}

// Two collectors share a PostgreSQL store; a project one of them serves
// is deleted through the other. The first closes it within the sweep
// (its live stream ends cleanly) and answers it, meanwhile, with a clean
// failure (503) and then as a project that does not exist (404).
func TestDeleteProjectOtherCollector(t *testing.T) {
	dsn := pgtest.Schema(t)
	pe := newProjectsEnvAt(t, Options{}, dsn)
	st2, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	o2 := pe.srv.o
	o2.Store = st2
	other := newEnv(t, o2)
	as2 := func(k, method, path string, body []byte) int {
		other.key = pe.keys[k]
		defer func() { other.key = "" }()
		code, _, _ := other.do(method, path, "application/x-ndjson", body, ProjectHeader, "b")
		return code
	}
	if code := as2("all", "POST", "/v1/records", ndjson(run(0xb1, "bravo"))); code != 200 {
		t.Fatalf("ingest b through the other collector: %d", code)
	}
	other.key = pe.keys["readB"]
	sse := other.stream(t, "/api/v1/stream", "")
	other.key = ""
	streamEnd := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(sse.resp.Body)
		for sc.Scan() {
		}
		streamEnd <- sc.Err()
	}()
	if code, b := pe.as("all", "DELETE", "/api/v1/projects/b", "", nil); code != 200 {
		t.Fatalf("DELETE b: %d %s", code, b)
	}
	deadline := time.Now().Add(15 * time.Second)
	for n := byte(0); ; n++ {
		code := as2("all", "POST", "/v1/records", ndjson(run(0xd0+n%16, "after")))
		if code == 404 {
			break
		}
		if code != 503 && code != 200 {
			t.Fatalf("ingest into b through the other collector after the delete: %d", code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other collector still serves b: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-streamEnd:
		if err != nil {
			t.Errorf("b's live stream on the other collector ended with %v", err)
		}
	case <-time.After(2 * projectSweep):
		t.Fatal("b's live stream on the other collector is still open")
	}
}
