package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/loupe-dev/loupe/online"
)

// The online evaluation rules API (Options.Online):
//
//	GET    /api/v1/rules               every rule, its state and statistics (read)
//	POST   /api/v1/rules               add a rule: a JSON object as in a rules file (admin)
//	POST   /api/v1/rules/{name}/pause  pause a rule (admin)
//	POST   /api/v1/rules/{name}/resume resume a paused rule (admin)
//	DELETE /api/v1/rules/{name}        delete a rule made through the API (admin)

// rulesList is the JSON of GET /api/v1/rules.
type rulesList struct {
	// Enabled is false when the server runs no online evaluation.
	Enabled bool            `json:"enabled"`
	Rules   []online.Status `json:"rules"`
	Dropped int64           `json:"dropped"` // ended traces not queued (full queue), every rule
	Pending int             `json:"pending"` // traces queued or being evaluated
}

const rulesOff = "online evaluation is off on this server: it needs a store that keeps scores, and starts with loupe serve (--rules FILE for the file's rules)"

func (s *Server) listRules(w http.ResponseWriter, r *http.Request) {
	e := s.o.Online
	if e == nil {
		writeJSON(w, http.StatusOK, rulesList{Rules: []online.Status{}})
		return
	}
	rs, err := e.Rules(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if rs == nil {
		rs = []online.Status{}
	}
	s.writeJSON(w, r, http.StatusOK, rulesList{Enabled: true, Rules: rs, Dropped: e.Dropped(), Pending: e.Pending()})
}

func (s *Server) addRule(w http.ResponseWriter, r *http.Request) {
	e := s.o.Online
	if e == nil {
		writeError(w, http.StatusConflict, rulesOff)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, online.MaxRuleBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the rule is larger than %d bytes; shorten it", online.MaxRuleBytes))
		return
	}
	rule, err := online.ParseRule("request", body)
	if err != nil {
		writeError(w, http.StatusBadRequest, clip(err.Error(), maxErrorText))
		return
	}
	st, err := e.AddRule(r.Context(), rule)
	if err != nil {
		s.ruleError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusCreated, st)
}

func (s *Server) pauseRule(w http.ResponseWriter, r *http.Request)  { s.setRule(w, r, true) }
func (s *Server) resumeRule(w http.ResponseWriter, r *http.Request) { s.setRule(w, r, false) }

func (s *Server) setRule(w http.ResponseWriter, r *http.Request, pause bool) {
	e := s.o.Online
	if e == nil {
		writeError(w, http.StatusNotFound, rulesOff)
		return
	}
	name := r.PathValue("name")
	var (
		st  online.Status
		err error
	)
	if pause {
		reason := "paused through the API"
		if id, ok := r.Context().Value(identityKey{}).(identity); ok && id.key.Name != "" {
			reason = "paused through the API by key " + clip(id.key.Name, 100)
		}
		st, err = e.Pause(r.Context(), name, reason)
	} else {
		st, err = e.Resume(r.Context(), name)
	}
	if err != nil {
		s.ruleError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, st)
}

func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) {
	e := s.o.Online
	if e == nil {
		writeError(w, http.StatusNotFound, rulesOff)
		return
	}
	if err := e.DeleteRule(r.Context(), r.PathValue("name")); err != nil {
		s.ruleError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": 1})
}

func (s *Server) ruleError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, online.ErrNoRule):
		writeError(w, http.StatusNotFound, clip(err.Error(), maxErrorText))
	case errors.Is(err, online.ErrConflict):
		writeError(w, http.StatusConflict, clip(err.Error(), maxErrorText))
	default:
		s.storeError(w, r, err)
	}
}
