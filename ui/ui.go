// Package ui is Loupe's web UI: static JavaScript modules and CSS, embedded
// in the binary with go:embed, served by `loupe serve` at /. There is no
// build step and no network dependency: `go build` alone builds it, and
// what is served is exactly what is in ui/assets.
//
// The pages read the collector's JSON API (/api/v1) and its live streams
// from the same origin. Everything from traces is untrusted and rendered
// as text (textContent, never innerHTML); Handler sends a strict
// Content-Security-Policy (scripts from this origin only, no inline
// script, no eval) so that even a rendering bug cannot run trace content.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy sent with every answer of Handler:
// scripts, styles, images and API calls from this origin only; no inline
// script, no eval, no plugins, no framing, no form posts, and no base URI
// rewriting.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Assets returns the embedded files (index.html, *.js, *.css) rooted at
// their directory. The caller must not modify them.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("ui: embedded assets missing: " + err.Error()) // cannot happen: go:embed above
	}
	return sub
}

// Handler returns the http.Handler of the UI. It answers GET and HEAD: a
// path naming an asset serves that asset, and any other path serves
// index.html, so that deep links (/runs/<id>, /#/run/<id>) load the
// application, which reads the location itself. It is safe for
// concurrent use.
func Handler() http.Handler {
	files := Assets()
	fsrv := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" || name == "index.html" {
			serveIndex(w, r, files)
			return
		}
		if st, err := fs.Stat(files, name); err != nil || st.IsDir() {
			serveIndex(w, r, files) // a client-side route
			return
		}
		// Assets change with the binary; revalidate rather than cache
		// stale modules across an upgrade.
		h.Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
	})
}

func serveIndex(w http.ResponseWriter, r *http.Request, files fs.FS) {
	b, err := fs.ReadFile(files, "index.html")
	if err != nil {
		http.Error(w, "ui: index.html missing", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}
