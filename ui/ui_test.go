package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/loupe-dev/loupe/ui"
)

func TestHandler(t *testing.T) {
	h := ui.Handler()
	for _, tc := range []struct {
		method, path string
		code         int
		ctype, body  string
	}{
		{"GET", "/", 200, "text/html", `<script type="module" src="/app.js">`},
		{"GET", "/index.html", 200, "text/html", "<main id=\"app\">"},
		{"GET", "/run/abc", 200, "text/html", "<main id=\"app\">"}, // a client-side route
		{"GET", "/app.js", 200, "javascript", "route()"},
		{"GET", "/style.css", 200, "text/css", ".tree"},
		{"GET", "/../../etc/passwd", 200, "text/html", "<main id=\"app\">"},
		{"HEAD", "/", 200, "text/html", ""},
		{"POST", "/", 405, "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, res.StatusCode, tc.code)
			continue
		}
		if got := res.Header.Get("Content-Security-Policy"); got != ui.CSP {
			t.Errorf("%s %s: CSP %q", tc.method, tc.path, got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no nosniff", tc.method, tc.path)
		}
		if !strings.Contains(res.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("%s %s: Content-Type %q, want %s", tc.method, tc.path, res.Header.Get("Content-Type"), tc.ctype)
		}
		if !strings.Contains(string(body), tc.body) {
			t.Errorf("%s %s: body lacks %q", tc.method, tc.path, tc.body)
		}
	}
}

// The CSP forbids inline script and eval; the assets must not need them,
// and must never parse data as HTML.
func TestAssetsStayWithinTheCSP(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(['"]|javascript:`)
	inline := regexp.MustCompile(`<script(?:[^>]*)>[^<]|\son[a-z]+=|style=`)
	n := 0
	err := fs.WalkDir(ui.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(ui.Assets(), p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "//") || strings.HasPrefix(l, "*") || strings.HasPrefix(l, "/*") {
				continue
			}
			if strings.HasSuffix(p, ".js") && banned.MatchString(line) {
				t.Errorf("%s:%d: %s", p, i+1, strings.TrimSpace(line))
			}
			if strings.HasSuffix(p, ".html") && inline.MatchString(line) {
				t.Errorf("%s:%d: inline script, handler or style: %s", p, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walking the assets: %v (%d files)", err, n)
	}
}

// Without the UI the server answers / as before (a JSON 404); with it,
// API paths still get the API's answers.
func TestServerUIOption(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		path  string
		code  int
		ctype string
	}{
		{"/", 200, "text/html"},
		{"/run/x", 200, "text/html"},
		{"/api/v1/nope", 404, "application/json"},
		{"/v1/nope", 404, "application/json"},
		{"/api/v1/traces", 200, "application/json"},
	} {
		res, err := http.Get(e.ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.code || !strings.Contains(res.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("GET %s: %d %s, want %d %s", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.code, tc.ctype)
		}
	}
}
