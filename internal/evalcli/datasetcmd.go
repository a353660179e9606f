package evalcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/dataset"
	"github.com/loupe-dev/loupe/store"
)

// What `loupe dataset` and `loupe experiments` do, over an open store.

func datasets(st store.Store) (store.Datasets, error) { return dataset.Open(st) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// DatasetAdd adds runs to dataset name as one new version: the stored
// traces ids name (full ids or unambiguous prefixes) and the runs query
// selects (at most limit), each made into a case by dataset.FromTrace.
func DatasetAdd(ctx context.Context, st store.Store, name string, ids []string, query string, limit int, w io.Writer) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	if err := store.CheckName("dataset", name); err != nil {
		return err
	}
	if len(ids) == 0 && query == "" {
		return errors.New("nothing to add: give trace ids (loupe dataset add TRACE… --dataset NAME) or --query 'tool:search since:7d'")
	}
	var cases []dataset.Case
	for _, id := range ids {
		c, err := dataset.CaseFromStore(ctx, st, id)
		if err != nil {
			return fmt.Errorf("trace %s: %w", id, err)
		}
		cases = append(cases, c)
	}
	if query != "" {
		qc, err := dataset.CasesFromQuery(ctx, st, query, limit)
		if err != nil {
			return err
		}
		cases = append(cases, qc...)
	}
	d, err := dataset.Add(ctx, dss, name, fmt.Sprintf("added %d case(s) from traces", len(cases)), cases)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dataset %s: %d case(s) added, %d in all\n", d.Ref(), len(cases), len(d.Cases))
	for _, c := range d.Cases[len(d.Cases)-len(cases):] {
		fmt.Fprintf(w, "  %s  from trace %s  (%d expected tool call(s))\n", c.ID, c.Trace, len(c.Trajectory.Expected))
	}
	return nil
}

// DatasetList lists the datasets.
func DatasetList(ctx context.Context, st store.Store, w io.Writer, asJSON bool) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	list, err := dss.ListDatasets(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if list == nil {
			list = []store.DatasetVersion{}
		}
		return writeJSON(w, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no datasets; add a run with loupe dataset add TRACE --dataset NAME")
		return nil
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-24s %7s %6s  %-20s  %s\n", "NAME", "VERSION", "CASES", "UPDATED", "NOTE")
	for _, v := range list {
		fmt.Fprintf(bw, "%-24s %7d %6d  %-20s  %s\n", v.Name, v.Version, v.CaseCount, v.Created.Format(time.DateTime), v.Note)
	}
	return bw.Flush()
}

// DatasetShow prints a dataset version's cases and the dataset's versions.
func DatasetShow(ctx context.Context, st store.Store, ref string, w io.Writer, asJSON bool) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	d, err := dataset.Load(ctx, dss, ref)
	if err != nil {
		return err
	}
	versions, err := dss.DatasetVersions(ctx, d.Name)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, struct {
			*dataset.Dataset
			Versions []store.DatasetVersion `json:"versions"`
		}{d, versions})
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "dataset %s  (%d cases, %s)\n\n", d.Ref(), len(d.Cases), d.Created.Format(time.DateTime))
	for _, c := range d.Cases {
		fmt.Fprintf(bw, "%s\n  input: %s\n", c.ID, oneLine(c.Input))
		if c.Criteria != "" {
			fmt.Fprintf(bw, "  criteria: %s\n", oneLine(c.Criteria))
		}
		if t := c.Trajectory; t != nil {
			var tools []string
			for _, e := range t.Expected {
				tools = append(tools, e.Tool)
			}
			fmt.Fprintf(bw, "  trajectory (%s): %s\n", orIn(t.Mode), strings.Join(tools, " → "))
		}
		for _, a := range c.Assertions {
			fmt.Fprintf(bw, "  assert: %v\n", a["type"])
		}
		if c.Trace != "" {
			fmt.Fprintf(bw, "  from trace %s\n", c.Trace)
		}
	}
	fmt.Fprintf(bw, "\nversions:\n")
	for _, v := range versions {
		fmt.Fprintf(bw, "  %s@%d  %3d cases  %s  %s\n", v.Name, v.Version, v.CaseCount, v.Created.Format(time.DateTime), v.Note)
	}
	return bw.Flush()
}

func orIn(mode string) string {
	if mode == "" {
		return "in_order"
	}
	return mode
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

// DatasetRemove deletes every version of dataset name.
func DatasetRemove(ctx context.Context, st store.Store, name string, w io.Writer) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	ok, err := dss.DeleteDataset(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("dataset %s: %w", name, store.ErrNotFound)
	}
	fmt.Fprintf(w, "dataset %s removed (its experiments are kept)\n", name)
	return nil
}

// DatasetExport writes a dataset version as an AgentV eval file.
func DatasetExport(ctx context.Context, st store.Store, ref string, w io.Writer) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	d, err := dataset.Load(ctx, dss, ref)
	if err != nil {
		return err
	}
	return dataset.Export(w, "Loupe dataset "+d.Ref(), d.Cases)
}

// DatasetImport stores the cases of an AgentV eval file as a new version
// of dataset name that replaces its cases.
func DatasetImport(ctx context.Context, st store.Store, name, path string, w io.Writer) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	data, err := readLimited(path, dataset.MaxImportBytes)
	if err != nil {
		return err
	}
	cases, err := dataset.Import(path, data)
	if err != nil {
		return err
	}
	base := 0
	if cur, err := dss.DatasetVersion(ctx, name, 0); err == nil {
		base = cur.Version
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	d, err := dataset.Save(ctx, dss, name, base, "imported from "+path, cases)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "dataset %s: %d case(s) imported from %s\n", d.Ref(), len(cases), path)
	return nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: more than the limit of %d bytes", path, limit)
	}
	return data, nil
}

// ExperimentsList lists experiments, newest first (of one dataset when
// datasetName is set).
func ExperimentsList(ctx context.Context, st store.Store, datasetName string, w io.Writer, asJSON bool) error {
	dss, err := datasets(st)
	if err != nil {
		return err
	}
	list, err := dataset.ListExperiments(ctx, dss, datasetName)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no experiments; run one with loupe eval --dataset NAME --command … (or --model, --script)")
		return nil
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-32s %-20s %-20s %6s %9s %6s %10s\n", "NAME", "DATASET", "CREATED", "CASES", "PASS RATE", "SCORE", "P50")
	for _, e := range list {
		fmt.Fprintf(bw, "%-32s %-20s %-20s %6d %8.1f%% %6.3f %8.0fms\n", e.Name, fmt.Sprintf("%s@%d", e.Dataset, e.Version), e.Created.Format(time.DateTime),
			e.Summary.Cases, 100*e.Summary.PassRate, e.Summary.MeanScore, e.Summary.P50Ms)
	}
	return bw.Flush()
}

// ExperimentsDiff compares experiment b with the baseline a.
func ExperimentsDiff(ctx context.Context, st store.Store, a, b string, w io.Writer, asJSON bool) (*dataset.Comparison, error) {
	dss, err := datasets(st)
	if err != nil {
		return nil, err
	}
	ea, err := dataset.LoadExperiment(ctx, dss, a)
	if err != nil {
		return nil, err
	}
	eb, err := dataset.LoadExperiment(ctx, dss, b)
	if err != nil {
		return nil, err
	}
	c := dataset.Compare(ea, eb)
	if asJSON {
		return c, writeJSON(w, c)
	}
	return c, dataset.WriteText(w, c)
}
