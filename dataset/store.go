package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Dataset is one version of a dataset with its cases.
type Dataset struct {
	store.DatasetVersion
	// Cases are the version's cases, in order.
	Cases []Case `json:"cases"`
}

// Ref returns "NAME@VERSION".
func (d *Dataset) Ref() string { return fmt.Sprintf("%s@%d", d.Name, d.Version) }

// ParseRef splits "NAME" or "NAME@VERSION"; version 0 means the newest.
func ParseRef(s string) (name string, version int, err error) {
	name, v, ok := strings.Cut(s, "@")
	if err := store.CheckName("dataset", name); err != nil {
		return "", 0, err
	}
	if !ok {
		return name, 0, nil
	}
	version, err = strconv.Atoi(v)
	if err != nil || version < 1 {
		return "", 0, fmt.Errorf("dataset %q: the version after @ must be a number from 1, e.g. %s@2", s, name)
	}
	return name, version, nil
}

// Open returns st's store.Datasets, or an error saying the backend keeps
// none.
func Open(st store.Store) (store.Datasets, error) {
	ds, ok := st.(store.Datasets)
	if !ok {
		return nil, errors.New("this store keeps no datasets: use the SQLite or PostgreSQL store")
	}
	return ds, nil
}

// Load reads dataset ref ("NAME" for the newest version, "NAME@VERSION").
func Load(ctx context.Context, ds store.Datasets, ref string) (*Dataset, error) {
	name, version, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	v, err := ds.DatasetVersion(ctx, name, version)
	if err != nil {
		return nil, err
	}
	d := &Dataset{DatasetVersion: v}
	if err := json.Unmarshal(v.Cases, &d.Cases); err != nil {
		return nil, fmt.Errorf("dataset %s: stored cases: %w", d.Ref(), err)
	}
	d.DatasetVersion.Cases = nil
	return d, nil
}

// Save stores cases as a new version of dataset name made from version
// base (0 for a new dataset), after CheckCases. A change made to an older
// version than the newest fails with store.ErrConflict.
func Save(ctx context.Context, ds store.Datasets, name string, base int, note string, cases []Case) (*Dataset, error) {
	if err := store.CheckName("dataset", name); err != nil {
		return nil, err
	}
	if cases == nil {
		cases = []Case{}
	}
	if err := CheckCases(cases); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	b, err := json.Marshal(cases)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	v, err := ds.PutDatasetVersion(ctx, base, store.DatasetVersion{Name: name, Note: note, CaseCount: len(cases), Cases: b})
	if err != nil {
		return nil, err
	}
	v.Cases = nil
	return &Dataset{DatasetVersion: v, Cases: cases}, nil
}

// Add appends cases to the newest version of dataset name (creating it),
// as a new version; a case whose id is taken gets a suffix. A concurrent
// change is retried on the new version a few times.
func Add(ctx context.Context, ds store.Datasets, name, note string, add []Case) (*Dataset, error) {
	for try := 0; ; try++ {
		var base []Case
		version := 0
		cur, err := Load(ctx, ds, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			base, version = cur.Cases, cur.Version
		}
		d, err := Save(ctx, ds, name, version, note, merge(base, add))
		if errors.Is(err, store.ErrConflict) && try < 5 {
			continue
		}
		return d, err
	}
}

// CaseFromStore makes a case (FromTrace) from a stored trace, given as a
// full id or an unambiguous prefix.
func CaseFromStore(ctx context.Context, st store.Store, id string) (Case, error) {
	tid, err := store.Resolve(ctx, st, id)
	if err != nil {
		return Case{}, err
	}
	tr, err := st.Trace(ctx, tid)
	if err != nil {
		return Case{}, err
	}
	return FromTrace(tr.Records), nil
}

// CasesFromQuery makes a case from each agent run a search query selects
// (store.ParseQuery's language, e.g. "tool:search since:7d"), newest
// first, at most limit (0: 100). Evaluation results (tag loupe:eval) are
// never selected.
func CasesFromQuery(ctx context.Context, st store.Store, query string, limit int) ([]Case, error) {
	q, err := store.ParseQuery(query)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	var ids []trace.TraceID
	for th, err := range store.SearchTraces(ctx, st, q, 0) {
		if err != nil {
			return nil, err
		}
		if isEval(th.Summary.Tags) {
			continue
		}
		ids = append(ids, th.Summary.ID)
		if len(ids) >= limit {
			break
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the query %q selects no run", query)
	}
	var out []Case
	for _, id := range ids {
		tr, err := st.Trace(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, FromTrace(tr.Records))
	}
	return out, nil
}

func isEval(tags []string) bool {
	for _, t := range tags {
		if t == store.TagEvaluation {
			return true
		}
	}
	return false
}
