package evalrun

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/loupe-dev/loupe/eval"
	"github.com/loupe-dev/loupe/store"
	"github.com/loupe-dev/loupe/trace"
)

// Evaluation results are kept in the store as ordinary trace records, so
// every backend holds them without a schema change: an evaluation is a
// trace of its own, named ResultsRunName and tagged EvalTag, with one custom
// record named ResultRecord per case whose output is the case's Row
// (summary only, never the graded trace's content) followed by the
// model.call records of the LLM judge calls that graded it (children of
// the result record's span), and a tag EvalOfPrefix +
// "<trace id>" for every graded trace so that ResultsFor finds them.
const (
	// EvalTag marks the traces that hold evaluation results.
	EvalTag = store.TagEvaluation
	// EvalOfPrefix + a graded trace's hex id tags the evaluations that
	// graded it.
	EvalOfPrefix = "eval-of:"
	// ResultsRunName is the root run name of an evaluation's trace.
	ResultsRunName = "loupe eval"
	// ResultRecord names the custom records that hold one case's Row.
	ResultRecord = "eval.result"
)

// Save stores the report in st: the records of every graded run that has
// them (so the traces the results point to exist; appending a stored trace
// again is a no-op) and the results themselves, as described above. It
// returns the id of the results trace. The results trace always ends with
// the success termination — the evaluation itself ran — whatever the
// verdicts, which are in its result ({"passed", "failed", "skipped",
// "errors"}): an evaluation with failing cases must not be listed among
// failed agent runs (`loupe traces ls --status error`); its tag EvalTag
// ("loupe:eval") selects evaluations. now stamps the results trace; nil
// means time.Now.
func Save(ctx context.Context, st store.Store, rep *Report, now func() time.Time) (trace.TraceID, error) {
	for _, res := range rep.Results {
		if res.Run == nil || len(res.Run.Records) == 0 {
			continue
		}
		if _, err := st.Append(ctx, res.Run.Records); err != nil {
			return trace.TraceID{}, fmt.Errorf("storing the trace of case %s: %w", res.Case.ID, err)
		}
	}
	tags := []string{EvalTag}
	for _, res := range rep.Results {
		if res.Run != nil && !res.Run.TraceID.IsZero() {
			if t := EvalOfPrefix + res.Run.TraceID.String(); !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	var files []string
	for _, f := range rep.Files {
		files = append(files, f.Path)
	}
	tr := trace.New(trace.Options{Now: now, MaxValueBytes: -1})
	_, ec := tr.Start(ctx, ResultsRunName, trace.RunOptions{
		Input: trace.JSON(map[string]any{"files": files, "target": rep.Target, "mode": rep.Mode.String(), "threshold": rep.Threshold}),
		Tags:  tags,
	})
	spans := make([]trace.SpanID, len(rep.Results))
	for i, res := range rep.Results {
		// The judge calls that graded the case are model.call records
		// under its result record, so `loupe traces show` of the
		// evaluation shows each prompt, answer, tokens and cost next to
		// the grade; the row names their span ids.
		span := trace.NewSpanID()
		spans[i] = span
		ec.Record(trace.Record{Type: trace.TypeCustom, Name: ResultRecord, SpanID: span, Output: trace.JSON(NewRow(rep, res, RowOptions{}))})
		for _, r := range judgeRecords(res, span) {
			ec.Record(r)
		}
	}
	pass, fail, skip, errs := rep.Counts()
	ec.End(trace.JSON(map[string]int{"passed": pass, "failed": fail, "skipped": skip, "errors": errs, "graders_not_run": rep.GradersNotRun()}), nil)
	if _, err := st.Append(ctx, ec.Records()); err != nil {
		return trace.TraceID{}, fmt.Errorf("storing the evaluation results: %w", err)
	}
	if err := saveScores(ctx, st, rep, ec.TraceID(), spans, now); err != nil {
		return ec.TraceID(), fmt.Errorf("the results are stored as trace %s, but not their scores: %w", ec.TraceID(), err)
	}
	return ec.TraceID(), nil
}

// The scores Save gives every graded case, when the store keeps scores
// (store.Scorer): ScorePass, true when the case passed and false when it
// failed or could not run, and ScoreValue, the case's score from 0 to 1.
// They go to the case's trace when its run has one, else to the case's
// result record in the results trace. Skipped cases get none.
const (
	ScorePass  = "eval.pass"
	ScoreValue = "eval.score"
)

// saveScores stores the scores of rep's cases, source eval, with ids
// derived from the results trace, the case and the name, so that saving
// the same results again stores nothing twice.
func saveScores(ctx context.Context, st store.Store, rep *Report, results trace.TraceID, spans []trace.SpanID, now func() time.Time) error {
	if _, ok := st.(store.Scorer); !ok {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	var scores []store.Score
	for i, res := range rep.Results {
		v := res.Result.Verdict
		if v == eval.Skip {
			continue
		}
		target, span := results, spans[i]
		if res.Run != nil && !res.Run.TraceID.IsZero() {
			target, span = res.Run.TraceID, trace.SpanID{}
		}
		t := res.Time
		if t.IsZero() {
			t = now()
		}
		pass := 0.0
		if v == eval.Pass {
			pass = 1
		}
		comment := strings.ReplaceAll(strings.ToValidUTF8(fmt.Sprintf("case %s: %s", res.Case.ID, v), "\uFFFD"), "\x00", " ")
		comment = trace.TruncateUTF8(comment, store.MaxScoreCommentBytes)
		for _, s := range []store.Score{
			{Name: ScorePass, Kind: store.ScoreBoolean, Value: pass},
			{Name: ScoreValue, Kind: store.ScoreNumeric, Value: min(max(res.Result.Score, -store.MaxScoreValue), store.MaxScoreValue)},
		} {
			s.ID = scoreID(results, i, s.Name)
			s.TraceID, s.SpanID, s.Time = target, span, t
			s.Source, s.Author, s.Comment = store.SourceEval, ResultsRunName, comment
			scores = append(scores, s)
		}
	}
	for len(scores) > 0 {
		n := min(len(scores), store.MaxScoreBatch)
		if _, err := store.AddScores(ctx, st, scores[:n]); err != nil {
			return err
		}
		scores = scores[n:]
	}
	return nil
}

// scoreID is the id of a case's score: a hash of the results trace, the
// case's position and the score's name.
func scoreID(results trace.TraceID, i int, name string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%s", results, i, name))
	return hex.EncodeToString(sum[:16])
}

// StoredResult is one evaluation's result for a trace, as ResultsFor finds
// it.
type StoredResult struct {
	// Eval is the id of the evaluation's results trace.
	Eval trace.TraceID `json:"eval"`
	// Row is the case's result row.
	Row Row `json:"row"`
}

// ResultsFor returns the stored evaluation results of trace id, newest
// evaluation first (within one evaluation, in case order). It is what
// `loupe traces show` calls to link a run to its grades. A trace never
// evaluated has no results and no error.
func ResultsFor(ctx context.Context, st store.Store, id trace.TraceID) ([]StoredResult, error) {
	q := store.ListQuery{Filter: store.Filter{Tags: []string{EvalTag, EvalOfPrefix + id.String()}}, Limit: store.MaxLimit}
	var out []StoredResult
	for {
		page, err := st.List(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("listing evaluations of trace %s: %w", id, err)
		}
		for _, s := range page.Traces {
			tr, err := st.Trace(ctx, s.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("reading evaluation %s: %w", s.ID, err)
			}
			for i := range tr.Records {
				r := &tr.Records[i]
				if r.Type != trace.TypeCustom || r.Name != ResultRecord {
					continue
				}
				var row Row
				if err := r.Output.Decode(&row); err != nil {
					return nil, fmt.Errorf("evaluation %s record %d: result row: %w", s.ID, r.Seq, err)
				}
				if row.TraceID == id.String() {
					out = append(out, StoredResult{Eval: s.ID, Row: row})
				}
			}
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// WriteStoredResults renders a run's grades for `loupe traces show`: one
// line per stored result, newest evaluation first, naming the evaluation
// trace so that it can be shown too. It writes nothing when there are none.
func WriteStoredResults(w io.Writer, results []StoredResult) error {
	if len(results) == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\nEvaluations (%d):\n", len(results))
	for _, r := range results {
		fmt.Fprintf(bw, "  %-5s %s  score %.2f (threshold %.2f, mode %s)  %s  eval %s  %s\n",
			strings.ToUpper(string(r.Row.Verdict)), r.Row.TestID, r.Row.Score, r.Row.Threshold, r.Row.Mode,
			r.Row.EvalFile, r.Eval, r.Row.Timestamp.Format(time.RFC3339))
	}
	return bw.Flush()
}
