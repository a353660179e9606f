package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// Conversation sessions: the runs that share a session id
// (trace.RunInfo.Session), listed with their totals and read as a
// conversation. (Not the sign-in sessions of session.go.) The store's
// query layer answers (store.ListSessions, store.SessionTurns); these
// handlers read parameters and write answers.

// DefaultSessionRuns is how many of a session's last runs GET
// /api/v1/sessions/{id} reads when runs= is not given.
const DefaultSessionRuns = 50

// listConversations is GET /api/v1/sessions: sessions with their totals, the
// latest first, one page at a time; user=, since= and until= select the
// runs that count.
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := store.Criteria{User: q.Get("user"), Since: q.Get("since"), Until: q.Get("until")}.Filter(time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, cursor, err := pageArgs(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := store.ListSessions(r.Context(), s.o.Store, store.SessionQuery{User: f.User, Since: f.Since, Until: f.Until, Limit: limit, Cursor: cursor})
	switch {
	case errors.Is(err, store.ErrNoSessions):
		writeError(w, http.StatusNotImplemented, "this server's store does not list sessions")
		return
	case err != nil:
		s.queryError(w, r, err)
		return
	}
	if page.Sessions == nil {
		page.Sessions = []store.SessionSummary{}
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// getConversation is GET /api/v1/sessions/{id}: the session's totals and its
// last runs= runs as turns, oldest first.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	n := DefaultSessionRuns
	if v := r.URL.Query().Get("runs"); v != "" {
		x, err := strconv.Atoi(v)
		if err != nil || x < 1 || x > store.MaxSessionTurns {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("runs=%s: want 1 to %d", clip(v, 40), store.MaxSessionTurns))
			return
		}
		n = x
	}
	sum, turns, more, err := store.SessionTurns(r.Context(), s.o.Store, id, n)
	switch {
	case isNotFound(err):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no run belongs to session %q", clip(id, 80)))
		return
	case err != nil:
		s.queryError(w, r, err)
		return
	}
	if turns == nil {
		turns = []store.Turn{}
	}
	s.writeJSON(w, r, http.StatusOK, store.SessionView{Session: sum, Turns: turns, More: more})
}
