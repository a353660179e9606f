package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/loupe-dev/loupe/evalrun"
	"github.com/loupe-dev/loupe/internal/tracesview"
	"github.com/loupe-dev/loupe/server"
	"github.com/loupe-dev/loupe/store"
	_ "github.com/loupe-dev/loupe/store/backends" // registers sqlite and postgres
	"github.com/loupe-dev/loupe/trace"
	"github.com/loupe-dev/loupe/traceio"
)

// addDBFlag adds the persistent --db and --project flags to root.
func addDBFlag(root *cobra.Command) {
	root.PersistentFlags().String("db", "", "trace store: a SQLite path or a postgres:// DSN (env LOUPE_DB; default "+store.DefaultPath()+")")
	root.PersistentFlags().String("project", "", "the project whose traces, scores and datasets a command uses (env LOUPE_PROJECT; default \"default\"); see loupe projects")
}

// serverWideAnnotation marks the commands that use the default project's
// store whatever --project says: the ones that keep what belongs to no
// project (keys, the list of projects) or serve every project.
const serverWideAnnotation = "loupe-server-wide"

// projectOf returns the project the command should use: --project, else
// $LOUPE_PROJECT, else the default one.
func projectOf(cmd *cobra.Command) string {
	if f := cmd.Flag("project"); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := os.Getenv("LOUPE_PROJECT"); v != "" {
		return v
	}
	return store.DefaultProject
}

// serverWide reports whether cmd or a parent is marked serverWideAnnotation.
func serverWide(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[serverWideAnnotation] != "" {
			return true
		}
	}
	return false
}

// dbDSN returns the store the command should use: --db, else $LOUPE_DB,
// else the default path.
func dbDSN(cmd *cobra.Command) string {
	if f := cmd.Flag("db"); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := os.Getenv("LOUPE_DB"); v != "" {
		return v
	}
	return store.DefaultPath()
}

// withStore opens the store for writing (creating it if needed), runs fn
// and closes the store.
func withStore(cmd *cobra.Command, fn func(ctx context.Context, st store.Store) error) error {
	return useStore(cmd, false, fn)
}

// readStore is withStore for commands that only read: the store is opened
// read-only, so a store the user may only read works and a missing one is
// reported instead of created.
func readStore(cmd *cobra.Command, fn func(ctx context.Context, st store.Store) error) error {
	return useStore(cmd, true, fn)
}

func useStore(cmd *cobra.Command, readOnly bool, fn func(ctx context.Context, st store.Store) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	dsn := dbDSN(cmd)
	var st store.Store
	var err error
	if p := projectOf(cmd); p != store.DefaultProject && !serverWide(cmd) {
		if err := checkProject(ctx, dsn, p); err != nil {
			return err
		}
		if dsn, err = store.ProjectDSN(dsn, p); err != nil {
			return err
		}
	}
	if readOnly {
		st, err = store.OpenReadOnly(ctx, dsn)
		if errors.Is(err, store.ErrNoStore) {
			return fmt.Errorf("no store exists at %s; make one with %q or %q, or point --db (or LOUPE_DB) at an existing store",
				store.Redact(dsn), suggest(cmd, "traces", "import", "FILE"), suggest(cmd, "demo"))
		}
	} else {
		st, err = store.Open(ctx, dsn)
	}
	if err != nil {
		return err
	}
	if f := cmd.Flag("stale-after"); f != nil {
		d, _ := time.ParseDuration(f.Value.String()) // parsed already by the flag
		err = store.Configure(st, store.Options{StaleAfter: d})
	}
	if err == nil {
		err = fn(ctx, st)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkProject returns an error unless project p is recorded in the
// store at dsn (see loupe projects add), so that a typo in --project does
// not make a store of its own.
func checkProject(ctx context.Context, dsn, p string) error {
	if err := store.CheckProject(p); err != nil {
		return fmt.Errorf("--project: %w", err)
	}
	st, err := store.OpenReadOnly(ctx, dsn)
	if err != nil {
		return fmt.Errorf("--project %s: %w", p, err)
	}
	defer st.Close()
	ps, err := server.Projects(ctx, st)
	if err != nil {
		return fmt.Errorf("--project %s: %w", p, err)
	}
	for _, x := range ps {
		if x.Name == p {
			return nil
		}
	}
	return fmt.Errorf("--project %s: no such project in %s; make it with loupe projects add %s (loupe projects ls lists them)", p, store.Redact(dsn), p)
}

// nowFunc is the clock the traces commands use for relative times; tests
// replace it.
var nowFunc = time.Now

func newTracesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "traces",
		Short: "List, show, search, import, export and delete stored traces",
	}
	cmd.AddCommand(newTracesLsCmd(), newTracesShowCmd(), newTracesSearchCmd(), newTracesRmCmd(),
		newTracesPruneCmd(), newTracesExportCmd(), newTracesImportCmd(), newTracesDiffCmd())
	cmd.PersistentFlags().Duration("stale-after", store.DefaultStaleAfter,
		"show a trace whose run has not ended as incomplete once it has been silent this long (negative: never)")
	return cmd
}

// criteriaFlags registers the trace filters on cmd.
func criteriaFlags(cmd *cobra.Command, c *store.Criteria, search bool) {
	f := cmd.Flags()
	if !search {
		f.StringVar(&c.Name, "name", "", "root run name")
	}
	f.StringVar(&c.Status, "status", "", "termination reason: success, error, max_iterations, …, running, or incomplete (not ended and silent longer than --stale-after)")
	f.StringVar(&c.Since, "since", "", "started at or after: a duration before now (24h, 7d) or a time (2006-01-02, RFC 3339)")
	f.StringVar(&c.Until, "until", "", "started before (same forms as --since)")
	f.StringArrayVar(&c.Tags, "tag", nil, "has this run tag, e.g. env:ci (repeatable; all must match)")
	f.StringVar(&c.Model, "model", "", "called this model")
	f.StringVar(&c.Tool, "tool", "", "called this tool")
	f.StringVar(&c.Session, "session", "", "belongs to this session (conversation), exact")
	f.StringVar(&c.User, "user", "", "is this user's, exact")
	if search {
		f.Var(typesValue{&c.Types}, "type", "record type, e.g. tool.error (repeatable; any matches)")
		f.DurationVar(&c.MinDuration, "min-duration", 0, "trace lasted at least")
		f.DurationVar(&c.MaxDuration, "max-duration", 0, "trace lasted at most")
	} else {
		f.BoolVar(&c.Errors, "errors", false, "only traces with errors")
		f.Var(scoresValue{&c.Scores}, "score", "has a score NAME<OP>VALUE, e.g. helpfulness>=0.8, thumbs=false, label=good (repeatable; all must match)")
	}
}

// scoresValue is a repeatable flag of score conditions (store.ParseScoreCond).
type scoresValue struct{ conds *[]store.ScoreCond }

func (v scoresValue) String() string { return "" }

func (v scoresValue) Set(s string) error {
	c, err := store.ParseScoreCond(s)
	if err != nil {
		return err
	}
	*v.conds = append(*v.conds, c)
	return nil
}

func (scoresValue) Type() string { return "stringArray" }

// typesValue is a repeatable flag of record types, as a string array
// flag reads them: one type per use, kept as given (store.Criteria checks
// them).
type typesValue struct{ types *[]trace.Type }

func (v typesValue) String() string {
	if v.types == nil || len(*v.types) == 0 {
		return "" // no default shown in the help
	}
	s := make([]string, len(*v.types))
	for i, t := range *v.types {
		s[i] = string(t)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (v typesValue) Set(s string) error {
	*v.types = append(*v.types, trace.Type(s))
	return nil
}

func (typesValue) Type() string { return "stringArray" }

func newTracesLsCmd() *cobra.Command {
	var (
		c      store.Criteria
		limit  int
		page   int
		cursor string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List traces, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := c.AgentRuns(nowFunc())
			if err != nil {
				return err
			}
			if page < 1 {
				return fmt.Errorf("--page %d: pages are numbered from 1", page)
			}
			q := store.ListQuery{Filter: f, Limit: limit, Cursor: cursor}
			if cursor == "" {
				q.Offset = (page - 1) * max(limit, 0)
			}
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				res, err := st.List(ctx, q)
				if err != nil {
					return err
				}
				if res.Traces == nil {
					res.Traces = []store.Summary{}
				}
				table := func(w io.Writer) error { return tracesview.Table(w, res.Traces) }
				return tracesview.WritePage(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, res, table, res.Next)
			})
		},
	}
	criteriaFlags(cmd, &c, false)
	cmd.Flags().BoolVar(&c.Evaluations, "evals", false, "also list the traces that hold loupe eval results (left out by default; --tag loupe:eval lists only them)")
	cmd.Flags().IntVar(&limit, "limit", 50, "traces per page")
	cmd.Flags().IntVar(&page, "page", 1, "page number (with --limit)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTracesShowCmd() *cobra.Command {
	var (
		o      tracesview.ShowOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one trace: span tree, durations, tokens, cost, errors and memory pool",
		Long:  "Show one trace. ID may be a unique prefix of the trace id (at least 4 hex digits).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				id, err := store.Resolve(ctx, st, args[0])
				if err != nil {
					return err
				}
				t, err := st.Trace(ctx, id)
				if err != nil {
					return err
				}
				// The run's grades, from evaluations stored by loupe eval.
				evals, err := evalrun.ResultsFor(ctx, st, id)
				if err != nil {
					return err
				}
				if asJSON {
					return tracesview.WriteJSON(cmd.OutOrStdout(), struct {
						tracesview.TraceJSON
						Evaluations []evalrun.StoredResult `json:"evaluations,omitempty"`
					}{tracesview.TraceJSON{
						Summary: t.Summary, Stats: t.Stats, Memory: t.Memory, Spans: t.Spans, Records: t.Records}, evals})
				}
				if err := tracesview.Show(cmd.OutOrStdout(), t, o); err != nil {
					return err
				}
				return evalrun.WriteStoredResults(cmd.OutOrStdout(), evals)
			})
		},
	}
	cmd.Flags().BoolVar(&o.IO, "io", false, "include inputs, outputs and thinking")
	cmd.Flags().IntVar(&o.MaxIO, "max-io", 0, "bytes of each input/output to print (default 200; -1: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole trace as JSON")
	return cmd
}

func newTracesSearchCmd() *cobra.Command {
	var (
		c      store.Criteria
		limit  int
		cursor string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "search QUERY...",
		Short: "Search records by text and filters",
		Long: `Search records by text and filters. The query is words and "quoted phrases",
which must all occur in one record's name, error, input, output or thinking,
and filters in the form key:value (tool:NAME type:TYPE status:REASON since:24h
model:NAME tag:TAG min_duration:D max_duration:D has:errors). The flags add
filters. model:, tool: and has:errors show the records they name (the calls
of that model, the records of that tool, the records with an error); with
type: the types say which records to show and those filters select traces. Each hit shows the trace, the record, the field and a snippet with
the match in [brackets].`,
		RunE: func(cmd *cobra.Command, args []string) error {
			now := nowFunc()
			q, err := store.ParseQueryAt(strings.Join(args, " "), now)
			if err != nil {
				return err
			}
			// The flags add filters: both must hold.
			if q, err = c.Query(q, now); err != nil {
				return err
			}
			q.Limit, q.Cursor = limit, cursor
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				res, err := st.Search(ctx, q)
				if err != nil {
					return err
				}
				if res.Hits == nil {
					res.Hits = []store.Hit{}
				}
				table := func(w io.Writer) error {
					if len(res.Hits) == 0 {
						_, err := fmt.Fprintln(w, "no matches")
						return err
					}
					return tracesview.Hits(w, res.Hits, q)
				}
				return tracesview.WritePage(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, res, table, res.Next)
			})
		},
	}
	criteriaFlags(cmd, &c, true)
	cmd.Flags().IntVar(&limit, "limit", 50, "hits per page")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTracesRmCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete traces (IDs may be unique prefixes)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				ids := make([]trace.TraceID, 0, len(args))
				for _, a := range args {
					id, err := store.Resolve(ctx, st, a)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				n, err := st.Delete(ctx, ids...)
				if err != nil {
					return err
				}
				if asJSON {
					return tracesview.WriteJSON(cmd.OutOrStdout(), map[string]any{"deleted": n, "traces": ids})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d traces\n", n)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// durationValue is a flag taking store.ParseDuration's syntax (90m, 24h,
// 7d), the same as --since.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return ""
	}
	if *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := store.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (durationValue) Type() string { return "duration" }

func newTracesPruneCmd() *cobra.Command {
	var (
		p      store.PrunePolicy
		dryRun bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "prune (--older-than D | --keep N) [--dry-run]",
		Short: "Delete old traces by age or count",
		Long: `Delete traces by age (--older-than) or count (--keep), or both (a trace
either selects is deleted). A trace's age is the time since its run STARTED,
as recorded in the trace, not since it was imported: importing old traces
and then pruning with --older-than deletes them. Use --dry-run first to see
which traces would go.`,
		Example: "  loupe traces prune --older-than 30d --dry-run\n  loupe traces prune --older-than 720h --keep 1000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.OlderThan <= 0 && p.KeepNewest <= 0 {
				return errors.New("say what to prune: --older-than 30d and/or --keep 1000")
			}
			p.Now = nowFunc()
			run := func(ctx context.Context, st store.Store) error {
				var res store.PruneResult
				var err error
				if dryRun {
					res, err = tracesview.PrunePreview(ctx, st, p)
				} else {
					res, err = st.Prune(ctx, p)
				}
				if err != nil {
					return err
				}
				if asJSON {
					if res.Traces == nil {
						res.Traces = []trace.TraceID{}
					}
					return tracesview.WriteJSON(cmd.OutOrStdout(), struct {
						store.PruneResult
						DryRun bool `json:"dry_run,omitempty"`
					}{res, dryRun})
				}
				return tracesview.PruneReport(cmd.OutOrStdout(), res, dryRun)
			}
			if dryRun {
				return readStore(cmd, run)
			}
			return withStore(cmd, run)
		},
	}
	cmd.Flags().Var(durationValue{&p.OlderThan}, "older-than", "delete traces whose run started longer ago than this (90m, 24h, 7d; same forms as --since)")
	cmd.Flags().IntVar(&p.KeepNewest, "keep", 0, "keep only this many newest traces (by start time)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newTracesExportCmd() *cobra.Command {
	var (
		c   store.Criteria
		out string
	)
	cmd := &cobra.Command{
		Use:   "export [ID...]",
		Short: "Write the records of traces as Loupe JSON lines",
		Long:  "Write the records of the given traces (or of all traces matching the filters) as Loupe JSON lines, trace by trace, streaming.",
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := c.Filter(nowFunc())
			if err != nil {
				return err
			}
			return readStore(cmd, func(ctx context.Context, st store.Store) error {
				for _, a := range args {
					id, err := store.Resolve(ctx, st, a)
					if err != nil {
						return err
					}
					f.IDs = append(f.IDs, id)
				}
				var n int
				var err error
				if out == "" || out == "-" {
					n, err = tracesview.Export(ctx, cmd.OutOrStdout(), st, f)
				} else {
					n, err = tracesview.ExportFile(ctx, out, cmd.ErrOrStderr(), st, f)
				}
				if err == nil && n == 0 {
					// An empty result is not an error (a script may export
					// whatever matches), but silence looks like a hang or a bug.
					fmt.Fprintln(cmd.ErrOrStderr(), "loupe: no traces matched; nothing exported (loupe traces ls with the same filters lists what there is)")
				}
				return err
			})
		},
	}
	criteriaFlags(cmd, &c, false)
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func newTracesImportCmd() *cobra.Command {
	var (
		format     string
		asJSON     bool
		pricesFile string
	)
	cmd := &cobra.Command{
		Use:   "import FILE|FOLDER|-...",
		Short: "Import trace files (Loupe JSONL, AgentV, omni, Fragola OpenTelemetry)",
		Long: `Import trace files into the store. "-" reads standard input; a folder
imports the files directly in it (not its subfolders or hidden files), in
name order. --format auto (the default) tells the
format from the content; loupe, agentv, agentv-results, omni, otel-jsonl and otlp pick
one. Importing a file twice stores its records once. A record the store
refuses (a time outside 1678-2261, a seq beyond 2^63-1, …) is reported with
its file:line and left out; every other record of the file is stored. A
line that cannot be read is reported with its file:line and field; the
records before it are kept. Records repeating a trace and seq with
different content (the first copy is kept) and gaps in a trace's seqs are
reported as warnings with counts. The other files are imported either way,
and the command exits non-zero if a record was refused or a file failed.

Model calls that carry tokens but no cost are priced as loupe serve prices
them: from the built-in price table under --prices or $LOUPE_PRICES, at the
price in effect at the call's time; a model the table does not know gets an
unknown cost (shown as such), never $0. Costs in the file are kept.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := traceio.ParseFormat(format)
			if err != nil {
				return err
			}
			prices, err := loadPrices(pricesFile)
			if err != nil {
				return err
			}
			inputs, err := tracesview.ExpandInputs(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				// A progress bar only where a person watches: stderr is
				// the process's own and a terminal.
				var progress io.Writer
				if errw := cmd.ErrOrStderr(); errw == os.Stderr && term.IsTerminal(int(os.Stderr.Fd())) {
					progress = errw
				}
				return tracesview.ImportInputs(ctx, st, inputs, tracesview.ImportOptions{
					Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(), Progress: progress, Format: f, JSON: asJSON, Prices: prices,
				})
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "auto", "auto, loupe, agentv, agentv-results, omni, otel-jsonl (formerly fragola) or otlp")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	pricesFlag(cmd, &pricesFile)
	return cmd
}
