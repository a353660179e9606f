package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/store"
)

// testDatasets checks store.Datasets: immutable versions, the conflict of
// an edit made to an old version, listings without content, deletion, and
// experiments by name. A backend that does not implement it is skipped.
func testDatasets(t *testing.T, s store.Store) {
	ds, ok := s.(store.Datasets)
	if !ok {
		t.Skip("the backend does not implement store.Datasets")
	}
	ctx := context.Background()
	put := func(base int, name, cases string, n int) (store.DatasetVersion, error) {
		return ds.PutDatasetVersion(ctx, base, store.DatasetVersion{Name: name, Note: fmt.Sprintf("v%d", base+1), CaseCount: n, Cases: json.RawMessage(cases)})
	}
	if _, err := ds.DatasetVersion(ctx, "nope", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown dataset: %v, want ErrNotFound", err)
	}
	if _, err := ds.DatasetVersions(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("versions of an unknown dataset: %v, want ErrNotFound", err)
	}
	v1, err := put(0, "triage", `[{"id":"a"}]`, 1)
	if err != nil || v1.Version != 1 || v1.Created.IsZero() {
		t.Fatalf("first version: %+v, %v", v1, err)
	}
	if _, err := put(0, "triage", `[]`, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second version from base 0: %v, want ErrConflict", err)
	}
	if _, err := put(5, "triage", `[]`, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a version from a base ahead of the newest: %v, want ErrConflict", err)
	}
	v2, err := put(1, "triage", `[{"id":"a"},{"id":"b"}]`, 2)
	if err != nil || v2.Version != 2 {
		t.Fatalf("second version: %+v, %v", v2, err)
	}
	if _, err := put(0, "bad name", `[]`, 0); err == nil {
		t.Fatal("a name with a space was accepted")
	}
	if _, err := put(0, "other", `[]`, 0); err != nil {
		t.Fatal(err)
	}
	got, err := ds.DatasetVersion(ctx, "triage", 1)
	if err != nil || string(got.Cases) != `[{"id":"a"}]` || got.CaseCount != 1 || got.Note != "v1" {
		t.Fatalf("version 1 after version 2 was added: %+v %s, %v", got, got.Cases, err)
	}
	got, err = ds.DatasetVersion(ctx, "triage", 0)
	if err != nil || got.Version != 2 || got.CaseCount != 2 {
		t.Fatalf("newest: %+v, %v", got, err)
	}
	if _, err := ds.DatasetVersion(ctx, "triage", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version 3: %v, want ErrNotFound", err)
	}
	vs, err := ds.DatasetVersions(ctx, "triage")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].Cases != nil {
		t.Fatalf("versions: %+v, %v", vs, err)
	}
	all, err := ds.ListDatasets(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "other" || all[1].Name != "triage" || all[1].Version != 2 || all[1].Cases != nil {
		t.Fatalf("list: %+v, %v", all, err)
	}

	// Concurrent edits from the same base: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = put(2, "triage", `[]`, 0)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("concurrent edit: %v, want ErrConflict", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent edits from version 2 were stored, want 1", wins)
	}

	// Experiments.
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e1 := store.Experiment{Name: "before", Dataset: "triage", Version: 2, Created: when, Summary: json.RawMessage(`{"pass":1}`), Doc: json.RawMessage(`{"cases":[1]}`)}
	if err := ds.PutExperiment(ctx, e1); err != nil {
		t.Fatal(err)
	}
	if err := ds.PutExperiment(ctx, e1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("experiment name reused: %v, want ErrConflict", err)
	}
	e2 := store.Experiment{Name: "after", Dataset: "other", Version: 1, Created: when.Add(time.Hour), Doc: json.RawMessage(`{}`)}
	if err := ds.PutExperiment(ctx, e2); err != nil {
		t.Fatal(err)
	}
	ge, err := ds.Experiment(ctx, "before")
	if err != nil || !ge.Created.Equal(when) || string(ge.Doc) != `{"cases":[1]}` || string(ge.Summary) != `{"pass":1}` || ge.Version != 2 {
		t.Fatalf("experiment: %+v, %v", ge, err)
	}
	if _, err := ds.Experiment(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown experiment: %v", err)
	}
	le, err := ds.ListExperiments(ctx, "")
	if err != nil || len(le) != 2 || le[0].Name != "after" || le[0].Doc != nil {
		t.Fatalf("experiments: %+v, %v", le, err)
	}
	le, err = ds.ListExperiments(ctx, "triage")
	if err != nil || len(le) != 1 || le[0].Name != "before" {
		t.Fatalf("experiments of triage: %+v, %v", le, err)
	}

	// Deletion.
	if ok, err := ds.DeleteDataset(ctx, "triage"); !ok || err != nil {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	if ok, err := ds.DeleteDataset(ctx, "triage"); ok || err != nil {
		t.Fatalf("delete again: %v, %v", ok, err)
	}
	if _, err := ds.DatasetVersion(ctx, "triage", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted dataset: %v", err)
	}
	if _, err := ds.Experiment(ctx, "before"); err != nil {
		t.Fatalf("an experiment of a deleted dataset is gone: %v", err)
	}
	if ok, err := ds.DeleteExperiment(ctx, "before"); !ok || err != nil {
		t.Fatalf("delete experiment: %v, %v", ok, err)
	}
	if ok, err := ds.DeleteExperiment(ctx, "before"); ok || err != nil {
		t.Fatalf("delete experiment again: %v, %v", ok, err)
	}
}
