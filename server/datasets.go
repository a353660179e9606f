package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/store"
)

// Datasets and experiments (package dataset) over HTTP. Reading (lists,
// a dataset, an experiment, a comparison, the diff of two traces) takes a
// read key; adding cases takes an admin key, not an ingest key: a dataset
// is curated by a person, and an ingest key is what an agent in
// production holds. Deleting takes an admin key.

// datasetRoutes are the routes of this file; routes() appends them.
func (s *Server) datasetRoutes() []route {
	return []route{
		{"GET /api/v1/datasets", scopeRead, light, s.listDatasets},
		{"GET /api/v1/datasets/{name}", scopeRead, light, s.getDataset},
		{"GET /api/v1/datasets/{name}/export", scopeRead, light, s.exportDataset},
		{"POST /api/v1/datasets/{name}/cases", scopeAdmin, light, s.addCases},
		{"DELETE /api/v1/datasets/{name}", scopeAdmin, cheap, s.deleteDataset},
		{"GET /api/v1/traces/{id}/case", scopeRead, heavy, s.traceCase},
		{"GET /api/v1/experiments", scopeRead, light, s.listExperiments},
		{"GET /api/v1/experiments/compare", scopeRead, light, s.compareExperiments},
		{"GET /api/v1/experiments/{name}", scopeRead, light, s.getExperiment},
	}
}

// maxCasesBody bounds the body of POST /api/v1/datasets/{name}/cases.
const maxCasesBody = 8 << 20

// datasets answers 501 when the store keeps no datasets.
func (s *Server) datasets(w http.ResponseWriter) (store.Datasets, bool) {
	ds, err := dataset.Open(s.o.Store)
	if err != nil {
		writeError(w, http.StatusNotImplemented, err.Error())
		return nil, false
	}
	return ds, true
}

// datasetError answers a dataset or experiment error: not found and
// conflicts with their message (which names the dataset, not a file),
// bad input as 400, the rest as storeError.
func (s *Server) datasetError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	default:
		s.storeError(w, r, err)
	}
}

// DatasetListJSON is the answer of GET /api/v1/datasets.
type DatasetListJSON struct {
	Datasets []store.DatasetVersion `json:"datasets"`
}

func (s *Server) listDatasets(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	list, err := ds.ListDatasets(r.Context())
	if err != nil {
		s.datasetError(w, r, err)
		return
	}
	if list == nil {
		list = []store.DatasetVersion{}
	}
	s.writeJSON(w, r, http.StatusOK, DatasetListJSON{Datasets: list})
}

// DatasetJSON is the answer of GET /api/v1/datasets/{name}: one version
// with its cases, and every version of the dataset (without cases).
type DatasetJSON struct {
	*dataset.Dataset
	Versions []store.DatasetVersion `json:"versions"`
}

// datasetRef is the {name} of the path with the version query parameter.
func datasetRef(r *http.Request) (string, error) {
	ref := r.PathValue("name")
	if v := r.URL.Query().Get("version"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return "", fmt.Errorf("version=%q: want a number from 1", v)
		}
		ref += "@" + v
	}
	if _, _, err := dataset.ParseRef(ref); err != nil {
		return "", err
	}
	return ref, nil
}

func (s *Server) loadDataset(w http.ResponseWriter, r *http.Request) (store.Datasets, *dataset.Dataset, bool) {
	ds, ok := s.datasets(w)
	if !ok {
		return nil, nil, false
	}
	ref, err := datasetRef(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return nil, nil, false
	}
	d, err := dataset.Load(r.Context(), ds, ref)
	if err != nil {
		s.datasetError(w, r, err)
		return nil, nil, false
	}
	return ds, d, true
}

func (s *Server) getDataset(w http.ResponseWriter, r *http.Request) {
	ds, d, ok := s.loadDataset(w, r)
	if !ok {
		return
	}
	versions, err := ds.DatasetVersions(r.Context(), d.Name)
	if err != nil {
		s.datasetError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, DatasetJSON{Dataset: d, Versions: versions})
}

func (s *Server) exportDataset(w http.ResponseWriter, r *http.Request) {
	_, d, ok := s.loadDataset(w, r)
	if !ok {
		return
	}
	var buf bytes.Buffer
	if err := dataset.Export(&buf, "Loupe dataset "+d.Ref(), d.Cases); err != nil {
		s.storeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", `attachment; filename="`+d.Name+`.eval.yaml"`)
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// AddCasesJSON is the body of POST /api/v1/datasets/{name}/cases: cases
// as edited by the client, and stored traces to make cases from
// (dataset.FromTrace), appended in that order as one new version. Base,
// when set, is the version the client edited: if the dataset has moved
// on, the answer is 409 and nothing is stored.
type AddCasesJSON struct {
	Base   *int           `json:"base,omitempty"`
	Cases  []dataset.Case `json:"cases,omitempty"`
	Traces []string       `json:"traces,omitempty"`
}

func (s *Server) addCases(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if err := store.CheckName("dataset", name); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCasesBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxCasesBody))
		return
	}
	var in AddCasesJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not {\"cases\": [...], \"traces\": [...]}: "+err.Error())
		return
	}
	if len(in.Cases)+len(in.Traces) == 0 {
		writeError(w, http.StatusBadRequest, "nothing to add: give cases or traces")
		return
	}
	if len(in.Cases)+len(in.Traces) > dataset.MaxCases {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("more than %d cases", dataset.MaxCases))
		return
	}
	if err := dataset.CheckCases(in.Cases); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	add := in.Cases
	for _, id := range in.Traces {
		c, err := dataset.CaseFromStore(r.Context(), s.o.Store, id)
		if err != nil {
			if isNotFound(err) {
				writeError(w, http.StatusNotFound, err.Error())
			} else {
				s.queryError(w, r, err)
			}
			return
		}
		add = append(add, c)
	}
	note := fmt.Sprintf("added %d case(s)", len(add))
	var d *dataset.Dataset
	if in.Base != nil {
		var cur []dataset.Case
		if *in.Base > 0 {
			old, err := dataset.Load(r.Context(), ds, fmt.Sprintf("%s@%d", name, *in.Base))
			if err != nil {
				s.datasetError(w, r, err)
				return
			}
			cur = old.Cases
		}
		d, err = dataset.Save(r.Context(), ds, name, *in.Base, note, append(cur, add...))
	} else {
		d, err = dataset.Add(r.Context(), ds, name, note, add)
	}
	if err != nil {
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			s.datasetError(w, r, err)
		} else {
			writeError(w, http.StatusBadRequest, err.Error())
		}
		return
	}
	s.writeJSON(w, r, http.StatusOK, d)
}

func (s *Server) deleteDataset(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	found, err := ds.DeleteDataset(r.Context(), r.PathValue("name"))
	if err != nil {
		s.datasetError(w, r, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "dataset "+clip(r.PathValue("name"), 100)+": not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": 1})
}

// traceCase is GET /api/v1/traces/{id}/case: the case dataset.FromTrace
// makes of a stored run, for a client to edit before adding it.
func (s *Server) traceCase(w http.ResponseWriter, r *http.Request) {
	_, t, ok := s.loadTrace(w, r)
	if !ok {
		return
	}
	s.writeJSON(w, r, http.StatusOK, dataset.FromTrace(t.Records))
}

// ExperimentListJSON is the answer of GET /api/v1/experiments.
type ExperimentListJSON struct {
	Experiments []dataset.Listing `json:"experiments"`
}

func (s *Server) listExperiments(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	list, err := dataset.ListExperiments(r.Context(), ds, r.URL.Query().Get("dataset"))
	if err != nil {
		s.datasetError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, ExperimentListJSON{Experiments: list})
}

func (s *Server) getExperiment(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	e, err := dataset.LoadExperiment(r.Context(), ds, r.PathValue("name"))
	if err != nil {
		s.datasetError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, e)
}

// compareExperiments is GET /api/v1/experiments/compare?a=&b=: experiment
// b against the baseline a (dataset.Compare).
func (s *Server) compareExperiments(w http.ResponseWriter, r *http.Request) {
	ds, ok := s.datasets(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	if q.Get("a") == "" || q.Get("b") == "" {
		writeError(w, http.StatusBadRequest, "give two experiments: ?a=BASELINE&b=NAME")
		return
	}
	var ex [2]*dataset.Experiment
	for i, name := range []string{q.Get("a"), q.Get("b")} {
		e, err := dataset.LoadExperiment(r.Context(), ds, name)
		if err != nil {
			s.datasetError(w, r, err)
			return
		}
		ex[i] = e
	}
	s.writeJSON(w, r, http.StatusOK, dataset.Compare(ex[0], ex[1]))
}
