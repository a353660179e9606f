package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Datasets is implemented by backends that keep evaluation datasets and
// experiments beside the traces (the SQLite and PostgreSQL backends do).
// The store holds their content as opaque JSON documents: what a case or
// an experiment's result is belongs to the evaluation packages above
// (package dataset), not to the store. Methods are safe for concurrent
// use. A read-only store (see SchemaVersionError) refuses writes.
//
// A dataset is a name and a list of immutable versions numbered from 1:
// every change is a new version with the whole list of cases, so an
// experiment that names NAME@VERSION can always be read again.
type Datasets interface {
	// PutDatasetVersion stores v as version base+1 of dataset v.Name and
	// returns the stored version. base is the version the change was made
	// from (0 for a new dataset); when another version was added since,
	// it returns an error wrapping ErrConflict and stores nothing, so two
	// editors never lose each other's changes. v.Version and v.Created
	// are set by the store.
	PutDatasetVersion(ctx context.Context, base int, v DatasetVersion) (DatasetVersion, error)
	// DatasetVersion returns version version of dataset name (0: the
	// newest) with its cases, or an error wrapping ErrNotFound.
	DatasetVersion(ctx context.Context, name string, version int) (DatasetVersion, error)
	// DatasetVersions lists the versions of dataset name, newest first,
	// without their cases (Cases is nil); an unknown name yields an error
	// wrapping ErrNotFound.
	DatasetVersions(ctx context.Context, name string) ([]DatasetVersion, error)
	// ListDatasets lists every dataset's newest version, by name, without
	// cases.
	ListDatasets(ctx context.Context) ([]DatasetVersion, error)
	// DeleteDataset removes every version of dataset name and reports
	// whether it existed. Experiments that ran it are kept.
	DeleteDataset(ctx context.Context, name string) (bool, error)

	// PutExperiment stores a new experiment; a name already used yields an
	// error wrapping ErrConflict. e.Created is kept when set, else set by
	// the store.
	PutExperiment(ctx context.Context, e Experiment) error
	// Experiment returns the experiment named name with its document, or
	// an error wrapping ErrNotFound.
	Experiment(ctx context.Context, name string) (Experiment, error)
	// ListExperiments lists experiments newest first, without their
	// documents (Doc is nil); dataset, when not empty, keeps those that
	// ran that dataset.
	ListExperiments(ctx context.Context, dataset string) ([]Experiment, error)
	// DeleteExperiment removes an experiment and reports whether it
	// existed. The traces of its runs are kept.
	DeleteExperiment(ctx context.Context, name string) (bool, error)
}

// ErrConflict is wrapped by errors for a write that lost a race or reuses
// a name (a dataset changed since the version an edit was based on, an
// experiment name already taken).
var ErrConflict = errors.New("conflict")

// DatasetVersion is one immutable version of a dataset.
type DatasetVersion struct {
	// Name is the dataset's name (see CheckName).
	Name string `json:"name"`
	// Version numbers the versions from 1.
	Version int `json:"version"`
	// Created is when the version was stored.
	Created time.Time `json:"created"`
	// Note says what changed ("added 3 cases from traces").
	Note string `json:"note,omitempty"`
	// CaseCount is how many cases Cases holds.
	CaseCount int `json:"case_count"`
	// Cases is the JSON array of the version's cases, as the evaluation
	// layer encodes them; nil in listings.
	Cases json.RawMessage `json:"cases,omitempty"`
}

// Experiment is one run of a dataset, as stored: who ran which version,
// and a document holding its configuration and per-case results.
type Experiment struct {
	// Name identifies the experiment (see CheckName).
	Name string `json:"name"`
	// Dataset and Version are the dataset version that was run.
	Dataset string `json:"dataset"`
	Version int    `json:"version"`
	// Created is when the experiment ran.
	Created time.Time `json:"created"`
	// Summary is a small JSON object for listings (pass rate, counts).
	Summary json.RawMessage `json:"summary,omitempty"`
	// Doc is the whole experiment as the evaluation layer encodes it;
	// nil in listings.
	Doc json.RawMessage `json:"doc,omitempty"`
}

// Size limits of datasets and experiments, so one request cannot fill the
// store.
const (
	MaxDatasetNameBytes = 128
	MaxDatasetBytes     = 32 << 20
	MaxExperimentBytes  = 64 << 20
)

// CheckName reports whether s can name a dataset or an experiment: 1 to
// MaxNameBytes bytes of letters, digits, '-', '_' and '.', starting with a
// letter or digit (so NAME@VERSION and URLs need no escaping).
func CheckName(what, s string) error {
	if s == "" || len(s) > MaxDatasetNameBytes || !utf8.ValidString(s) {
		return fmt.Errorf("%s name %q: want 1 to %d characters", what, s, MaxDatasetNameBytes)
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok && i > 0 && (c == '-' || c == '_' || c == '.') {
			ok = true
		}
		if !ok {
			return fmt.Errorf("%s name %q: character %q at %d is not allowed; use letters, digits, '-', '_' and '.', starting with a letter or digit", what, s, c, i+1)
		}
	}
	return nil
}
