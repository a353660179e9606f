package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// testClock is a clock the test moves (Server.now).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// documented fails t unless openapi.json lists code for op ("post
// /api/v1/session").
func documented(t *testing.T, op string, code int) {
	t.Helper()
	var doc openAPIDocument
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	method, path, _ := strings.Cut(op, " ")
	var o operation
	if err := json.Unmarshal(doc.Paths[path][method], &o); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if _, ok := o.Responses[strconv.Itoa(code)]; !ok {
		t.Errorf("%s: status %d is not in openapi.json", op, code)
	}
}

// signIn posts key to /api/v1/session and returns the status, the body
// and the session cookie set, if any.
func (e *env) signIn(t *testing.T, key string, hdr ...string) (int, string, *http.Cookie) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"key": key})
	code, b, resp := e.do("POST", "/api/v1/session", "application/json", body, hdr...)
	documented(t, "post /api/v1/session", code)
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			return code, string(b), c
		}
	}
	return code, string(b), nil
}

// withCookie sends a request that carries the session cookie value and no
// Authorization header.
func (e *env) withCookie(method, path, value string, hdr ...string) (int, []byte, *http.Response) {
	e.t.Helper()
	return e.do(method, path, "", nil, append([]string{"Cookie", SessionCookie + "=" + value}, hdr...)...)
}

// openStream opens a live stream with the session cookie and returns its
// status; the stream is closed at once.
func (e *env) openStream(t *testing.T, path, value string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", e.ts.URL+path, nil)
	req.Header.Set("Cookie", SessionCookie+"="+value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 && resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream %s: Content-Type %q", path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode
}

// cleared reports whether resp clears the session cookie.
func cleared(resp *http.Response) bool {
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie && c.MaxAge < 0 && c.Value == "" {
			return true
		}
	}
	return false
}

func TestSessions(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	keys := map[Scope]string{}
	for _, sc := range []Scope{ScopeIngest, ScopeRead, ScopeAdmin} {
		tok, _, err := CreateKey(ctx, st, sc, string(sc)+" key", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keys[sc] = tok
	}
	e := newEnv(t, Options{Store: st, RequireKeys: true})
	clock := &testClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	e.srv.now = clock.now
	e.key = keys[ScopeIngest]
	if code, b, _ := e.do("POST", "/v1/records", "application/x-ndjson", ndjson(run(4, "s"))); code != 200 {
		t.Fatalf("ingest: %d %s", code, b)
	}
	e.key = ""
	id := "04010000000000000000000000000000"

	// Without a key or a session, the UI's first question is a 401.
	code, _, _ := e.do("GET", "/api/v1/session", "", nil)
	if code != 401 {
		t.Errorf("GET /api/v1/session without credentials: %d", code)
	}
	documented(t, "get /api/v1/session", code)

	t.Run("refused", func(t *testing.T) {
		for _, tt := range []struct {
			key  string
			code int
			msg  string
		}{
			{"", 401, "malformed"},
			{"hello", 401, "malformed"},
			{"lk_0000000000000000_nope", 401, "unknown or revoked"},
			{keys[ScopeRead] + "x", 401, "unknown or revoked"},
			{keys[ScopeIngest], 403, "read or admin"},
		} {
			code, body, c := e.signIn(t, tt.key)
			if code != tt.code || !strings.Contains(body, tt.msg) || c != nil {
				t.Errorf("sign in with %.12q: %d %s (cookie %v), want %d %q", tt.key, code, body, c, tt.code, tt.msg)
			}
		}
		for _, tt := range []struct {
			ctype, body string
			code        int
		}{
			{"text/plain", `{"key":"` + keys[ScopeRead] + `"}`, 415},
			{"application/x-www-form-urlencoded", "key=" + keys[ScopeRead], 415},
			{"application/json", `{"key":`, 400},
			{"application/json", `{"key":"` + strings.Repeat("a", 8<<10) + `"}`, 400},
		} {
			code, b, resp := e.do("POST", "/api/v1/session", tt.ctype, []byte(tt.body))
			if code != tt.code || len(resp.Cookies()) > 0 {
				t.Errorf("sign in with %s %.20q: %d %s, want %d", tt.ctype, tt.body, code, b, tt.code)
			}
			documented(t, "post /api/v1/session", code)
		}
		// A page of another origin cannot sign the browser in (login CSRF).
		if code, body, c := e.signIn(t, keys[ScopeRead], "Sec-Fetch-Site", "cross-site"); code != 403 || c != nil {
			t.Errorf("cross-site sign-in: %d %s", code, body)
		}
		if code, body, c := e.signIn(t, keys[ScopeRead], "Origin", "http://evil.example"); code != 403 || c != nil {
			t.Errorf("sign-in from another origin: %d %s", code, body)
		}
		// A cookie the server never made.
		code, b, resp := e.withCookie("GET", "/api/v1/traces", "bm90IGEgc2Vzc2lvbg")
		if code != 401 || !strings.Contains(string(b), "sign in again") || !cleared(resp) {
			t.Errorf("unknown session: %d %s %v", code, b, resp.Cookies())
		}
	})

	// A read key signs in.
	code, body, read := e.signIn(t, keys[ScopeRead], "Sec-Fetch-Site", "same-origin")
	if code != 200 || read == nil {
		t.Fatalf("sign in with the read key: %d %s", code, body)
	}
	var info sessionInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.Scope != ScopeRead || info.Name != "read key" || info.Via != "session" ||
		info.Expires == nil || !info.Expires.Equal(clock.now().Add(12*time.Hour)) || !info.KeysRequired {
		t.Errorf("sign-in answer: %s (%v)", body, err)
	}
	t.Run("cookie", func(t *testing.T) {
		if !read.HttpOnly || read.SameSite != http.SameSiteStrictMode || read.Path != "/" || read.Secure || read.Domain != "" ||
			read.MaxAge != int(SessionTTL/time.Second) || !read.Expires.Equal(clock.now().Add(SessionTTL)) {
			t.Errorf("cookie attributes: %s", read.String())
		}
		if raw, err := base64.RawURLEncoding.DecodeString(read.Value); err != nil || len(raw) != 32 {
			t.Errorf("cookie value %q: %d bytes, %v", read.Value, len(raw), err)
		}
		// Secure when the browser came over TLS, directly or through a proxy.
		for _, tls := range []bool{false, true} {
			url := "http://loupe.example/api/v1/session"
			if tls {
				url = "https://loupe.example/api/v1/session"
			}
			r := httptest.NewRequest("POST", url, strings.NewReader(`{"key":"`+keys[ScopeRead]+`"}`))
			r.Header.Set("Content-Type", "application/json")
			if !tls {
				r.Header.Set("X-Forwarded-Proto", "https")
			}
			w := httptest.NewRecorder()
			e.srv.ServeHTTP(w, r)
			cs := w.Result().Cookies()
			if w.Code != 200 || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
				t.Errorf("sign-in over TLS (direct %v): %d %v", tls, w.Code, cs)
			}
		}
	})

	t.Run("read", func(t *testing.T) {
		for _, tt := range []struct {
			method, path string
			code         int
		}{
			{"GET", "/api/v1/traces", 200},
			{"GET", "/api/v1/traces/" + id, 200},
			{"GET", "/api/v1/search?q=lookup", 200},
			{"GET", "/api/v1/aggregates", 200},
			{"GET", "/api/v1/evaluations", 200},
			{"DELETE", "/api/v1/traces/" + id, 403}, // read keys see; only admin keys delete
			{"POST", "/v1/records", 401},            // the cookie is for /api/ only
			{"POST", "/v1/traces", 401},
		} {
			if code, b, _ := e.withCookie(tt.method, tt.path, read.Value); code != tt.code {
				t.Errorf("%s %s with a read session: %d %s, want %d", tt.method, tt.path, code, b, tt.code)
			}
		}
		for _, p := range []string{"/api/v1/stream", "/api/v1/traces/" + id + "/stream"} {
			if code := e.openStream(t, p, read.Value); code != 200 {
				t.Errorf("stream %s with a session: %d", p, code)
			}
		}
		code, b, _ := e.withCookie("GET", "/api/v1/session", read.Value)
		if code != 200 || !strings.Contains(string(b), `"scope":"read"`) || !strings.Contains(string(b), `"via":"session"`) {
			t.Errorf("GET /api/v1/session: %d %s", code, b)
		}
		documented(t, "get /api/v1/session", code)
		// An Authorization header wins over the cookie.
		if code, _, _ := e.withCookie("GET", "/api/v1/traces", read.Value, "Authorization", "Bearer "+keys[ScopeIngest]); code != 403 {
			t.Errorf("ingest key with a read session: %d", code)
		}
	})

	// An admin key signs in and may delete, from the UI's own origin only.
	code, body, admin := e.signIn(t, keys[ScopeAdmin])
	if code != 200 || admin == nil || !strings.Contains(body, `"scope":"admin"`) {
		t.Fatalf("sign in with the admin key: %d %s", code, body)
	}
	t.Run("admin", func(t *testing.T) {
		for _, hdr := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site"},
			{"Origin", "http://evil.example"},
		} {
			if code, b, _ := e.withCookie("DELETE", "/api/v1/traces/"+id, admin.Value, hdr...); code != 403 || !strings.Contains(string(b), "another origin") {
				t.Errorf("cross-origin delete with an admin session (%s): %d %s", hdr, code, b)
			}
			// Signing out is a state change too.
			if code, _, _ := e.withCookie("DELETE", "/api/v1/session", admin.Value, hdr...); code != 403 {
				t.Errorf("cross-origin sign-out (%s): %d", hdr, code)
			}
		}
		if stored(t, st, run(4, "s")[0].TraceID) != 4 {
			t.Fatal("a cross-origin request deleted the trace")
		}
		if code, b, _ := e.withCookie("DELETE", "/api/v1/traces/"+id, admin.Value, "Sec-Fetch-Site", "same-origin", "Origin", e.ts.URL); code != 200 {
			t.Errorf("delete with an admin session: %d %s", code, b)
		}
	})

	t.Run("revoked", func(t *testing.T) {
		if err := RevokeKey(ctx, st, keys[ScopeRead]); err != nil {
			t.Fatal(err)
		}
		clock.add(keyRecheck)
		code, b, resp := e.withCookie("GET", "/api/v1/traces", read.Value)
		if code != 401 || !strings.Contains(string(b), "revoked") || !cleared(resp) {
			t.Errorf("session of a revoked key: %d %s", code, b)
		}
		if code := e.openStream(t, "/api/v1/stream", read.Value); code != 401 {
			t.Errorf("stream with the session of a revoked key: %d", code)
		}
		// The other key's session goes on.
		if code, _, _ := e.withCookie("GET", "/api/v1/traces", admin.Value); code != 200 {
			t.Errorf("admin session after revoking the read key: %d", code)
		}
	})

	t.Run("sign-out", func(t *testing.T) {
		code, _, resp := e.withCookie("DELETE", "/api/v1/session", admin.Value, "Sec-Fetch-Site", "same-origin")
		if code != 204 || !cleared(resp) {
			t.Errorf("sign-out: %d %v", code, resp.Cookies())
		}
		documented(t, "delete /api/v1/session", code)
		if code, _, _ := e.withCookie("GET", "/api/v1/traces", admin.Value); code != 401 {
			t.Errorf("after sign-out: %d", code)
		}
		if code := e.openStream(t, "/api/v1/traces/"+id+"/stream", admin.Value); code != 401 {
			t.Errorf("stream after sign-out: %d", code)
		}
		if code, _, _ := e.do("DELETE", "/api/v1/session", "", nil); code != 204 {
			t.Errorf("sign-out without a session: %d", code)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		// Fixed from sign-in: using the session does not extend it.
		_, _, s := e.signIn(t, keys[ScopeAdmin])
		if s == nil {
			t.Fatal("no session")
		}
		for _, step := range []time.Duration{time.Hour, 6 * time.Hour, 5*time.Hour - time.Second} {
			clock.add(step)
			if code, b, _ := e.withCookie("GET", "/api/v1/traces", s.Value); code != 200 {
				t.Fatalf("%v into the session: %d %s", step, code, b)
			}
		}
		clock.add(time.Second) // 12 h after sign-in
		if code, b, resp := e.withCookie("GET", "/api/v1/traces", s.Value); code != 401 || !strings.Contains(string(b), "sign in again") || !cleared(resp) {
			t.Errorf("expired session: %d %s", code, b)
		}
		if code := e.openStream(t, "/api/v1/stream", s.Value); code != 401 {
			t.Errorf("stream with an expired session: %d", code)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		// One key holds at most maxSessionsPerKey sessions: the oldest goes.
		var first *http.Cookie
		for i := 0; i <= maxSessionsPerKey; i++ {
			_, _, c := e.signIn(t, keys[ScopeAdmin])
			if c == nil {
				t.Fatal("no session")
			}
			if i == 0 {
				first = c
			}
			clock.add(time.Millisecond)
		}
		if code, _, _ := e.withCookie("GET", "/api/v1/traces", first.Value); code != 401 {
			t.Errorf("the oldest of %d sessions: %d", maxSessionsPerKey+1, code)
		}
		e.srv.sessions.mu.Lock()
		n := len(e.srv.sessions.m)
		e.srv.sessions.mu.Unlock()
		if n != maxSessionsPerKey {
			t.Errorf("%d sessions kept, want %d", n, maxSessionsPerKey)
		}
	})
}

// Without RequireKeys the UI asks and learns that no key is needed; there
// is nothing to sign in to.
func TestSessionWithoutKeys(t *testing.T) {
	e := newEnv(t, Options{})
	if code, b, _ := e.do("GET", "/api/v1/session", "", nil); code != 200 || strings.TrimSpace(string(b)) != `{"keys_required":false}` {
		t.Errorf("GET /api/v1/session: %d %s", code, b)
	}
	if code, b, _ := e.do("POST", "/api/v1/session", "application/json", []byte(`{"key":"lk_x"}`)); code != 400 {
		t.Errorf("POST /api/v1/session: %d %s", code, b)
	}
}

// TestSessionsAcrossCollectors: two collectors on one store behind one
// address share sessions: a cookie made by one is accepted by the other
// (and after a restart), and a sign-out or a revocation through either
// ends the session on both within keyRecheck.
func TestSessionsAcrossCollectors(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	clock := &testClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	read, k, err := CreateKey(ctx, st, ScopeRead, "reader", clock.now())
	if err != nil {
		t.Fatal(err)
	}
	a := newEnv(t, Options{Store: st, RequireKeys: true})
	b := newEnv(t, Options{Store: st, RequireKeys: true})
	a.srv.now, b.srv.now = clock.now, clock.now
	ok := func(e *env, value string) bool {
		code, _, _ := e.withCookie("GET", "/api/v1/traces", value)
		return code == 200
	}

	code, _, c := a.signIn(t, read)
	if code != 200 || c == nil {
		t.Fatalf("sign-in on a: %d", code)
	}
	if !ok(a, c.Value) || !ok(b, c.Value) {
		t.Fatal("a session made on a is not accepted by both collectors")
	}
	// A third collector started later (a restart) knows it too.
	restarted := newEnv(t, Options{Store: st, RequireKeys: true})
	restarted.srv.now = clock.now
	if !ok(restarted, c.Value) {
		t.Error("a session does not survive a restart")
	}

	// Sign-out through b: b refuses at once, a within keyRecheck.
	if code, _, _ := b.withCookie("DELETE", "/api/v1/session", c.Value); code != 204 {
		t.Fatalf("sign-out on b: %d", code)
	}
	if ok(b, c.Value) {
		t.Error("b accepts a session signed out on b")
	}
	clock.add(keyRecheck)
	if ok(a, c.Value) {
		t.Error("a accepts a session signed out on b after keyRecheck")
	}

	// Revocation: every collector refuses the key's sessions within
	// keyRecheck.
	_, _, c2 := b.signIn(t, read)
	if c2 == nil || !ok(a, c2.Value) {
		t.Fatal("second session")
	}
	if err := RevokeKey(ctx, st, k.ID); err != nil {
		t.Fatal(err)
	}
	clock.add(keyRecheck)
	for name, e := range map[string]*env{"a": a, "b": b} {
		if code, body, _ := e.withCookie("GET", "/api/v1/traces", c2.Value); code != 401 || !strings.Contains(string(body), "sign in again") {
			t.Errorf("%s after revocation: %d %s", name, code, body)
		}
	}
	// Nothing of the sessions is left in the store but hashes, and the
	// revoked key's session is gone.
	all, err := st.(store.Settings).Settings(ctx, sessionPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range all {
		if strings.Contains(name+v, c.Value) || strings.Contains(name+v, c2.Value) {
			t.Error("a cookie is stored in clear")
		}
	}
	if len(all) != 0 {
		t.Errorf("%d sessions left in the store, want 0", len(all))
	}
}
