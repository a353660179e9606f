package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/loupe-dev/loupe/alert"
	"github.com/loupe-dev/loupe/store"
)

// Monitors and alerts (package alert): the definitions live in the
// store's settings, so any collector on the store may change them and
// every collector running an engine evaluates them; firings and their
// deliveries are in the store too. Webhook URLs are answered redacted.
//
//	GET    /api/v1/monitors          every monitor with its state and last value (read keys)
//	POST   /api/v1/monitors          create one (admin keys); 409 if the name is taken
//	PUT    /api/v1/monitors/{name}   create or replace one (admin keys)
//	DELETE /api/v1/monitors/{name}   delete one (admin keys); its firings stay
//	GET    /api/v1/alerts            firings, newest first, with their deliveries (read keys)

// maxMonitorBody bounds a monitor's definition in a request.
const maxMonitorBody = 64 << 10

// alertEngine returns the engine the API answers from, or answers 501.
func (s *Server) alertEngine(w http.ResponseWriter) *alert.Engine {
	if s.alerts == nil {
		writeError(w, http.StatusNotImplemented, "this store keeps no monitors or alerts (it implements neither store.Settings nor store.Alerts)")
	}
	return s.alerts
}

// newAlertEngine is the engine of Options.Alerts, or one over the store
// that only reads and writes definitions and firings (no evaluation) when
// the store can keep them; nil when it cannot.
func newAlertEngine(o *Options) *alert.Engine {
	if o.Alerts != nil {
		return o.Alerts
	}
	e, err := alert.New(alert.Options{Store: o.Store, Logger: o.Logger})
	if err != nil {
		return nil
	}
	return e
}

// MonitorsJSON is the answer of GET /api/v1/monitors.
type MonitorsJSON struct {
	Monitors []alert.Status `json:"monitors"`
}

func (s *Server) listMonitors(w http.ResponseWriter, r *http.Request) {
	e := s.alertEngine(w)
	if e == nil {
		return
	}
	sts, err := e.Statuses(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if sts == nil {
		sts = []alert.Status{}
	}
	s.writeJSON(w, r, http.StatusOK, MonitorsJSON{Monitors: sts})
}

// readMonitor decodes a request's monitor, or answers 400.
func readMonitor(w http.ResponseWriter, r *http.Request) (alert.Monitor, bool) {
	var m alert.Monitor
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMonitorBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		writeError(w, http.StatusBadRequest, "monitor: want a JSON object such as {\"name\": \"errors\", \"metric\": \"error_rate\", \"window\": \"5m\", \"threshold\": 0.2}: "+clip(err.Error(), maxErrorText))
		return m, false
	}
	return m, true
}

// putMonitor stores m and answers its status with code, or the error.
func (s *Server) putMonitor(w http.ResponseWriter, r *http.Request, e *alert.Engine, m alert.Monitor, code int) {
	if err := e.Put(r.Context(), m); err != nil {
		var fe *alert.FieldError
		if errors.As(err, &fe) {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: clip(err.Error(), maxErrorText), Field: fe.Field})
			return
		}
		s.storeError(w, r, err)
		return
	}
	s.log.Info("loupe serve: monitor set through the API", "monitor", m.Name, "metric", m.Metric)
	sts, err := e.Statuses(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	for _, st := range sts {
		if st.Monitor.Name == m.Name {
			s.writeJSON(w, r, code, st)
			return
		}
	}
	writeError(w, http.StatusConflict, "monitor "+clip(m.Name, 100)+" was deleted meanwhile")
}

func (s *Server) postMonitor(w http.ResponseWriter, r *http.Request) {
	e := s.alertEngine(w)
	if e == nil {
		return
	}
	m, ok := readMonitor(w, r)
	if !ok {
		return
	}
	if _, err := e.Get(r.Context(), m.Name); err == nil {
		writeError(w, http.StatusConflict, "monitor "+clip(m.Name, 100)+" exists; change it with PUT /api/v1/monitors/{name}")
		return
	} else if !errors.Is(err, alert.ErrNoMonitor) {
		s.storeError(w, r, err)
		return
	}
	s.putMonitor(w, r, e, m, http.StatusCreated)
}

func (s *Server) replaceMonitor(w http.ResponseWriter, r *http.Request) {
	e := s.alertEngine(w)
	if e == nil {
		return
	}
	m, ok := readMonitor(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if m.Name == "" {
		m.Name = name
	}
	if m.Name != name {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "name: " + clip(m.Name, 100) + " differs from the path's " + clip(name, 100) + "; to rename a monitor, create the new one and delete the old", Field: "name"})
		return
	}
	s.putMonitor(w, r, e, m, http.StatusOK)
}

func (s *Server) deleteMonitor(w http.ResponseWriter, r *http.Request) {
	e := s.alertEngine(w)
	if e == nil {
		return
	}
	if err := e.Delete(r.Context(), r.PathValue("name")); err != nil {
		if errors.Is(err, alert.ErrNoMonitor) {
			writeError(w, http.StatusNotFound, "no monitor "+clip(r.PathValue("name"), 100))
			return
		}
		s.storeError(w, r, err)
		return
	}
	s.log.Info("loupe serve: monitor deleted through the API", "monitor", r.PathValue("name"))
	w.WriteHeader(http.StatusNoContent)
}

// FiringJSON is a firing as GET /api/v1/alerts answers it: with its
// deliveries, and RunsLink, the web UI's route to the runs of its window
// (alert.RunsLink).
type FiringJSON struct {
	store.Firing
	RunsLink string `json:"runs_link"`
}

// AlertsJSON is the answer of GET /api/v1/alerts.
type AlertsJSON struct {
	Firings []FiringJSON `json:"firings"`
}

// listAlerts is GET /api/v1/alerts?monitor=NAME&open=true&limit=N.
func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) {
	e := s.alertEngine(w)
	if e == nil {
		return
	}
	q := r.URL.Query()
	f := store.FiringFilter{Monitor: q.Get("monitor"), Limit: 100}
	if v := q.Get("open"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "open: want true or false")
			return
		}
		f.Open = b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "limit: want a number from 1 to 1000")
			return
		}
		f.Limit = n
	}
	fs, err := e.Firings(r.Context(), f)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := AlertsJSON{Firings: make([]FiringJSON, len(fs))}
	for i := range fs {
		out.Firings[i] = FiringJSON{Firing: fs[i], RunsLink: alert.RunsLink(&fs[i])}
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
