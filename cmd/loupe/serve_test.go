package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/pgtest"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// serveRecords returns the NDJSON of a small run in trace id.
func serveRecords(id byte, n int) ([]byte, trace.TraceID) {
	tid := trace.TraceID{id, 0xee}
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	var b []byte
	for i := 1; i <= n; i++ {
		r := trace.Record{V: 1, TraceID: tid, SpanID: trace.SpanID{id, byte(i)}, ParentID: trace.SpanID{id, 0xff}, Seq: uint64(i) + 1,
			Time: t0.Add(time.Duration(i) * time.Millisecond), Type: trace.TypeToolEnd, Name: "t", Output: trace.Value(`"ok"`)}
		if i == 1 {
			r.Type, r.SpanID, r.ParentID, r.Seq, r.Name = trace.TypeRunStart, trace.SpanID{id, 0xff}, trace.SpanID{}, 1, "served"
		}
		b = append(r.AppendJSON(b), '\n')
	}
	return b, tid
}

// post posts body, Loupe records as JSON lines, to a loupe serve with key.
func post(t *testing.T, url, key string, body []byte) (int, string) {
	t.Helper()
	return httpDo(t, "POST", url+"/v1/records", key, "", append([]byte{}, body...))
}

// TestServeProcess runs `loupe serve` in a child process, ingests, sends
// SIGTERM and checks that it exits 0 with everything acknowledged stored.
func TestServeProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0")
	var wg sync.WaitGroup
	for i := byte(1); i <= 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := serveRecords(i, 200)
			if code, msg := post(t, url, "", body); code != 200 {
				t.Errorf("post: %d %s", code, msg)
			}
		}()
	}
	wg.Wait()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("loupe serve after SIGTERM: %v (want exit 0)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("loupe serve did not stop after SIGTERM")
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := byte(1); i <= 8; i++ {
		_, id := serveRecords(i, 200)
		tr, err := st.Trace(context.Background(), id)
		if err != nil || len(tr.Records) != 200 {
			t.Errorf("trace %d after shutdown: %v", i, err)
		}
	}
}

func TestServeNeedsKeysOffLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "k.db")
	_, _, err := run(t, db, "serve", "--addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "requires API keys") {
		t.Fatalf("serve on 0.0.0.0 without keys: %v", err)
	}
	if _, _, err := run(t, db, "serve", "--addr", "127.0.0.1:0", "--require-keys"); err == nil || !strings.Contains(err.Error(), "requires API keys") {
		t.Fatalf("serve --require-keys without keys: %v", err)
	}
	out := mustRun(t, db, "keys", "create", "--scope", "ingest", "--name", "ci")
	if !strings.HasPrefix(out, "lk_") {
		t.Fatalf("keys create printed %q", out)
	}
	ls := mustRun(t, db, "keys", "ls")
	if !strings.Contains(ls, "ingest") || !strings.Contains(ls, "ci") || strings.Contains(ls, strings.TrimSpace(out)) {
		t.Errorf("keys ls:\n%s", ls)
	}
	mustRun(t, db, "keys", "revoke", strings.TrimSpace(out))
	if ls := mustRun(t, db, "keys", "ls"); strings.Contains(ls, "ingest") {
		t.Errorf("after revoke:\n%s", ls)
	}
	if _, _, err := run(t, db, "keys", "create", "--scope", "root"); err == nil {
		t.Error("scope root accepted")
	}
}

// TestTwoServersOnePostgres: two collectors share one PostgreSQL store and
// ingest at once, including records of the same traces; keys created once
// work on both, and a revocation reaches both.
func TestTwoServersOnePostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var urls []string
	var stores []store.Store
	var wg sync.WaitGroup
	for range 2 {
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
		srv, err := server.New(server.Options{Store: st, RequireKeys: true})
		if err != nil {
			t.Fatal(err)
		}
		ready := make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := server.Serve(ctx, "127.0.0.1:0", srv, func(a net.Addr) { ready <- "http://" + a.String() }); err != nil {
				t.Error(err)
			}
		}()
		urls = append(urls, <-ready)
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, st := range stores {
			st.Close()
		}
	}()
	key, _, err := server.CreateKey(ctx, stores[0], server.ScopeAdmin, "two-servers", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	base := byte(time.Now().UnixNano()%200) + 20 // fresh trace ids in a shared database
	var pw sync.WaitGroup
	for i := range byte(6) {
		body, _ := serveRecords(base+i, 300)
		for s := range 2 { // every trace goes to both servers, in halves that overlap
			lines := bytes.SplitAfter(body, []byte("\n"))
			part := bytes.Join(lines[s*100:s*100+200], nil)
			pw.Add(1)
			go func() {
				defer pw.Done()
				if code, msg := post(t, urls[s], key, part); code != 200 {
					t.Errorf("server %d: %d %s", s, code, msg)
				}
			}()
		}
	}
	pw.Wait()
	for i := range byte(6) {
		_, id := serveRecords(base+i, 300)
		req, _ := http.NewRequest("GET", urls[1]+"/api/v1/traces/"+id.String(), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var tr server.TraceJSON
		err = json.NewDecoder(resp.Body).Decode(&tr)
		resp.Body.Close()
		if err != nil || len(tr.Records) != 300 || tr.Summary.Name != "served" {
			t.Errorf("trace %s: %v, %d records", id, err, len(tr.Records))
		}
		req, _ = http.NewRequest("DELETE", urls[0]+"/api/v1/traces/"+id.String(), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	if err := server.RevokeKey(ctx, stores[1], key); err != nil {
		t.Fatal(err)
	}
	for s, u := range urls {
		body, _ := serveRecords(base, 2)
		if code, _ := post(t, u, key, body); code != 401 {
			t.Errorf("server %d accepts a revoked key: %d", s, code)
		}
	}
}

// TestServeKill9 kills the collector with SIGKILL under load: every batch
// it had acknowledged is in the store afterwards.
func TestServeKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "kill.db")
	cmd, url := startChild(t, "--db", db, "serve", "--addr", "127.0.0.1:0")
	var mu sync.Mutex
	var acked []trace.TraceID
	var wg sync.WaitGroup
	stop := make(chan struct{})
	enough := make(chan struct{}) // closed at the 40th acknowledged batch
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tid := trace.TraceID{0x4b, byte(w), byte(i >> 8), byte(i)}
				var body []byte
				for s := 1; s <= 50; s++ {
					r := trace.Record{V: 1, TraceID: tid, SpanID: trace.SpanID{1, byte(s)}, Seq: uint64(s), Time: time.Now().UTC(), Type: trace.TypeCustom, Name: "load"}
					body = append(r.AppendJSON(body), '\n')
				}
				resp, err := client.Post(url+"/v1/records", "application/x-ndjson", bytes.NewReader(body))
				if err != nil {
					return // the server is gone
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					acked = append(acked, tid)
					if len(acked) == 40 {
						close(enough)
					}
					mu.Unlock()
				}
			}
		}()
	}
	// Let some batches through, then kill.
	select {
	case <-enough:
	case <-time.After(60 * time.Second): // a hang, not a timing claim
		close(stop)
		wg.Wait()
		t.Fatalf("the collector acknowledged %d batches in 60s, want 40 before the kill", len(acked))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	cmd.Wait()
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, id := range acked {
		tr, err := st.Trace(context.Background(), id)
		if err != nil || len(tr.Records) != 50 {
			t.Errorf("acknowledged trace %s after kill -9: %v", id, err)
		}
	}
	t.Logf("%d acknowledged batches checked", len(acked))
}

// TestServeRedacts checks that loupe serve scrubs secrets from what it
// ingests unless told not to, and that a misspelled rule is an error.
func TestServeRedacts(t *testing.T) {
	const secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	for _, tc := range []struct {
		name  string
		flags []string
		kept  bool
	}{
		{"default", nil, false},
		{"no-redact", []string{"--no-redact"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "serve.db")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			root := newRootCmd()
			root.SetArgs(append([]string{"--db", db, "serve", "--addr", "127.0.0.1:0"}, tc.flags...))
			root.SetErr(pw)
			done := make(chan error, 1)
			go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
			sc := bufio.NewScanner(pr)
			var url string
			for sc.Scan() {
				if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
					url, _, _ = strings.Cut(rest, ",")
					break
				}
			}
			go io.Copy(io.Discard, pr)
			if url == "" {
				t.Fatalf("the server did not say where it listens: %v", <-done)
			}
			tid := trace.TraceID{0x5e, 0xc2}
			t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
			recs := []trace.Record{
				{V: 1, TraceID: tid, SpanID: trace.SpanID{1}, Seq: 1, Time: t0, Type: trace.TypeRunStart, Name: "agent", Input: trace.Value(`{"api_key":"` + secret + `"}`)},
				{V: 1, TraceID: tid, SpanID: trace.SpanID{2}, ParentID: trace.SpanID{1}, Seq: 2, Time: t0, Type: trace.TypeToolError, Name: "fetch", Error: "401 with key " + secret},
			}
			var body []byte
			for _, r := range recs {
				body = append(r.AppendJSON(body), '\n')
			}
			if code, msg := post(t, url, "", body); code != 200 {
				t.Fatalf("post: %d %s", code, msg)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("loupe serve: %v", err)
			}
			st, err := store.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tr, err := st.Trace(context.Background(), tid)
			if err != nil || len(tr.Records) != 2 {
				t.Fatalf("stored trace: %v, %d records", err, len(tr.Records))
			}
			var all []byte
			for _, r := range tr.Records {
				all = r.AppendJSON(all)
			}
			if got := bytes.Contains(all, []byte(secret)); got != tc.kept {
				t.Errorf("secret stored = %v, want %v:\n%s", got, tc.kept, all)
			}
		})
	}
	t.Run("unknown rule", func(t *testing.T) {
		root := newRootCmd()
		root.SetArgs([]string{"--db", filepath.Join(t.TempDir(), "x.db"), "serve", "--addr", "127.0.0.1:0", "--redact-without", "jwtt"})
		root.SetErr(io.Discard)
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), `"jwtt"`) || !strings.Contains(err.Error(), "jwt") {
			t.Errorf("err = %v, want one naming the unknown rule and listing the rules", err)
		}
	})
}

// loupe serve --rules checks the rules file before it listens: an error
// names the file, line and column and what to do.
func TestServeRulesFileChecked(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - name: a\n    sample: 2\n    assertions: [{type: contains, value: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, filepath.Join(dir, "loupe.db"), "serve", "--addr", "127.0.0.1:0", "--rules", rules)
	if err == nil || !strings.Contains(err.Error(), rules+":3:13: rule \"a\": sample 2 is not in (0, 1]") {
		t.Fatalf("err %v", err)
	}
}

// TestServeReadDB runs loupe serve with --db on one schema and --read-db
// on another, opened by a role that may only SELECT, standing for a
// replica that lags: records posted land in --db, the runs list shows
// what --read-db holds.
func TestServeReadDB(t *testing.T) {
	ctx := context.Background()
	pdsn, rdsn := pgtest.Schema(t), pgtest.Schema(t)
	rw, err := store.Open(ctx, rdsn)
	if err != nil {
		t.Fatal(err)
	}
	onReplica, rid := serveRecords(1, 3)
	var recs []trace.Record
	for _, line := range bytes.Split(bytes.TrimSpace(onReplica), []byte("\n")) {
		r, err := trace.DecodeRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if _, err := rw.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	// A role that may only read the replica's schema.
	u, _ := neturl.Parse(rdsn)
	role := "ro_" + trace.NewSpanID().String()
	db, err := sql.Open("pgx", pdsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := u.Query().Get("search_path")
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + role} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", pdsn); err == nil {
			db.Exec("DROP OWNED BY " + role)
			db.Exec("DROP ROLE " + role)
			db.Close()
		}
	})
	u.User = neturl.User(role)

	_, url := startChild(t, "--db", pdsn, "serve", "--addr", "127.0.0.1:0", "--grpc-addr", "", "--read-db", u.String())
	posted, pid := serveRecords(2, 3)
	if code, msg := post(t, url, "", posted); code != 200 {
		t.Fatalf("post: %d %s", code, msg)
	}
	primary, err := store.Open(ctx, pdsn)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	if _, err := primary.Trace(ctx, pid); err != nil {
		t.Errorf("the posted trace is not in --db: %v", err)
	}
	resp, err := http.Get(url + "/api/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page store.ListPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 1 || page.Traces[0].ID != rid {
		t.Errorf("runs list: %+v; want the trace --read-db holds alone", page.Traces)
	}

	// A project reads from its own schema on the replica.
	mustRun(t, pdsn, "projects", "add", "team_a")
	rproj, err := store.ProjectDSN(rdsn, "team_a")
	if err != nil {
		t.Fatal(err)
	}
	pproj, _ := store.ProjectDSN(pdsn, "team_a")
	for _, d := range []string{rproj, pproj} {
		pu, _ := neturl.Parse(d)
		t.Cleanup(func() {
			if db, err := sql.Open("pgx", pdsn); err == nil {
				db.Exec(`DROP SCHEMA IF EXISTS "` + pu.Query().Get("search_path") + `" CASCADE`)
				db.Close()
			}
		})
	}
	rp, err := store.Open(ctx, rproj)
	if err != nil {
		t.Fatal(err)
	}
	inProject, tid := serveRecords(3, 3)
	var precs []trace.Record
	for _, line := range bytes.Split(bytes.TrimSpace(inProject), []byte("\n")) {
		r, _ := trace.DecodeRecord(line)
		precs = append(precs, r)
	}
	if _, err := rp.Append(ctx, precs); err != nil {
		t.Fatal(err)
	}
	rp.Close()
	pschema, _ := neturl.Parse(rproj)
	for _, q := range []string{"GRANT USAGE ON SCHEMA " + pschema.Query().Get("search_path") + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + pschema.Query().Get("search_path") + " TO " + role} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	resp, err = http.Get(url + "/api/v1/traces?project=team_a")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page = store.ListPage{}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 1 || page.Traces[0].ID != tid {
		t.Errorf("team_a's runs list: %+v; want the trace its schema on --read-db holds", page.Traces)
	}
}
