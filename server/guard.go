package server

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/trace"
)

// The checks every request passes before its route: the Host it names
// and, for state-changing methods, where a browser says it comes from.
// Loopback is no wall: any web page the user visits can send requests to
// 127.0.0.1, and a page whose name it rebinds to 127.0.0.1 talks to the
// collector as its own origin. docs/security.md has the threat model.

// hostAllowed reports whether host (a Host header, with or without port)
// names this collector: a loopback address, localhost or a name under
// .localhost (which browsers resolve to loopback themselves, so no
// attacker can rebind it), or one of the configured Hosts.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without Host: not a browser
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, name := range s.o.Hosts {
		if strings.EqualFold(strings.TrimSuffix(name, "."), h) {
			return true
		}
	}
	return false
}

// checkHost answers 403 when the request's Host is not this collector's.
// The check applies when keys are not required (the loopback mode, where
// nothing else stands between a rebound web page and the data) and
// whenever Options.Hosts names the public host names.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if s.o.RequireKeys && len(s.o.Hosts) == 0 {
		return true
	}
	if s.hostAllowed(r.Host) {
		return true
	}
	msg := fmt.Sprintf("Host %q is not a name of this collector: it answers loopback names (127.0.0.1, [::1], localhost)", clip(r.Host, 100))
	if len(s.o.Hosts) > 0 {
		msg += " and " + strings.Join(s.o.Hosts, ", ")
	} else {
		msg += "; to serve another name, run it with API keys and --public-host NAME"
	}
	writeError(w, http.StatusForbidden, msg)
	return false
}

// checkOrigin answers 403 to a state-changing request (POST, DELETE, …)
// that a browser sent from another origin: a web page can send such
// requests without a CORS preflight (text/plain, forms, beacons). SDKs and
// the CLI send neither Sec-Fetch-Site nor Origin and pass.
func (s *Server) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := s.cop.Check(r); err != nil {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s %s from a web page of another origin is refused (cross-site request forgery protection); send it from a program, or add the page's origin to the trusted origins", r.Method, clip(r.URL.Path, 100)))
		return false
	}
	return true
}

// recordTypes are the Content-Types POST /v1/records reads. A browser
// can send text/plain, form and multipart bodies to any address without
// asking first; a JSON type needs a CORS preflight, which the collector
// never grants.
var recordTypes = map[string]bool{
	"application/json":      true,
	"application/x-ndjson":  true,
	"application/ndjson":    true,
	"application/jsonl":     true,
	"application/x-jsonl":   true,
	"application/jsonlines": true,
}

// checkRecordType answers 415 unless the request's Content-Type is one
// of recordTypes.
func checkRecordType(w http.ResponseWriter, r *http.Request) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if recordTypes[ct] {
		return true
	}
	got := "no Content-Type"
	if v := r.Header.Get("Content-Type"); v != "" {
		got = fmt.Sprintf("Content-Type %q", clip(v, 100))
	}
	writeError(w, http.StatusUnsupportedMediaType, got+" is not Loupe records: send application/x-ndjson (one record a line) or application/json (curl: -H 'Content-Type: application/x-ndjson')")
	return false
}

// clip returns s cut to at most n bytes at a character boundary, with
// "…" added when it was cut: answers quote what a client sent, and a
// client may send megabytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return trace.TruncateUTF8(s, n) + "…"
}

// clearWriteDeadline removes the write deadline a previous response on
// the same keep-alive connection may have left (the per-write deadlines
// of deadlineWriter), so that it cannot cut this one short.
func clearWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}
