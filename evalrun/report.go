package evalrun

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/loupe-dev/loupe/eval"
)

// WriteSummary writes the terminal summary: one line per case (verdict,
// id, score against the threshold, partial-credit measures), the
// explanation (eval.CaseResult.Explain) of every case that did not pass, and
// a total line. Output depends only on the report, apart from the elapsed
// time on the total line when showTime is set.
func WriteSummary(w io.Writer, rep *Report, showTime bool) error {
	bw := bufio.NewWriter(w)
	idw := 0
	for _, r := range rep.Results {
		idw = max(idw, len(r.Case.ID))
	}
	file := ""
	for _, r := range rep.Results {
		if r.File != nil && r.File.Path != file {
			file = r.File.Path
			fmt.Fprintf(bw, "%s\n", file)
		}
		cr := r.Result
		fmt.Fprintf(bw, "  %-5s %-*s", strings.ToUpper(string(cr.Verdict)), idw, r.Case.ID)
		if r.Err == nil {
			fmt.Fprintf(bw, "  score %.2f (threshold %.2f)", cr.Score, cr.Threshold)
			if cr.Metrics != nil {
				fmt.Fprintf(bw, "  %s", cr.Metrics)
			}
			if n := len(graderProblems(cr)); n > 0 {
				fmt.Fprintf(bw, "  (%d grader(s) could not run)", n)
			}
		}
		fmt.Fprintln(bw)
		// Graders that did not count, so nothing disappears from the
		// summary; a failed case's explanation below shows its own.
		if cr.Verdict != eval.Fail && cr.Verdict != VerdictError {
			for _, a := range cr.Assertions {
				switch a.Verdict {
				case eval.Skip:
					fmt.Fprintf(bw, "        skipped %s: %s\n", a.Name, a.Reason)
				case eval.CouldNotRun:
					fmt.Fprintf(bw, "        could not run %s: %s\n", a.Name, a.Reason)
				}
			}
		}
		for _, w := range caseWarnings(r) {
			fmt.Fprintf(bw, "        warning: %s\n", w)
		}
	}
	var failed []Result
	for _, r := range rep.Results {
		if r.Result.Verdict == eval.Fail || r.Result.Verdict == VerdictError {
			failed = append(failed, r)
		}
	}
	for _, r := range failed {
		fmt.Fprintf(bw, "\n--- %s %s", strings.ToUpper(string(r.Result.Verdict)), r.Case.ID)
		if r.File != nil {
			fmt.Fprintf(bw, " (%s:%d)", r.File.Path, r.Case.Pos.Line)
		}
		fmt.Fprintln(bw)
		if r.Err != nil {
			fmt.Fprintf(bw, "%s\n", indent(r.Err.Error()))
			continue
		}
		fmt.Fprintf(bw, "%s\n", indent(strings.TrimRight(r.Result.Explain(), "\n")))
	}
	pass, fail, skip, errs := rep.Counts()
	fmt.Fprintf(bw, "\n%d cases: %d passed, %d failed, %d skipped, %d could not run (mode %s, threshold %.2f)",
		len(rep.Results), pass, fail, skip, errs, rep.Mode, rep.Threshold)
	if showTime {
		fmt.Fprintf(bw, " in %s", rep.Elapsed.Round(1e6))
	}
	fmt.Fprintln(bw)
	for _, l := range judgeTotals(rep) {
		fmt.Fprintln(bw, l)
	}
	if h := noJudgeHint(rep); h != "" {
		fmt.Fprintln(bw, h)
	}
	if n := rep.GradersNotRun(); n > 0 {
		fmt.Fprintf(bw, "%d grader(s) could not run; see the reasons above\n", n)
	}
	if len(rep.Results) > 0 && pass+fail == 0 && errs == 0 {
		fmt.Fprintln(bw, "no case was graded: every grader was skipped (see the reasons above); this is not a success")
	}
	return bw.Flush()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// JUnit XML, in the shape CI systems (Jenkins, GitLab, GitHub reporters)
// read: one testsuite per eval file, one testcase per case.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

// JUnitOptions configure WriteJUnit.
type JUnitOptions struct {
	// Times writes each case's elapsed time; off, every time is 0 so the
	// output is reproducible (golden files).
	Times bool
	// Baseline, when set, names the experiment the results were compared
	// with; it is a property of every suite.
	Baseline string
	// Regressions maps the id of each case that passed in the baseline
	// and does not pass now to a sentence saying so. Such a case's
	// failure (or error) has type "regression" and that message, so a CI
	// report tells a regression from a case that never passed.
	Regressions map[string]string
}

// WriteJUnit writes the report as JUnit XML: a testsuite per eval file
// (named by its path, with the mode, threshold and target as properties)
// and a testcase per case (classname is the suite name). A failed case has
// a failure whose message gives the score and whose text is eval's
// explanation; a case that could not run, or with a grader that could not
// run, has an error; a skipped case has skipped with the reasons.
func WriteJUnit(w io.Writer, rep *Report, o JUnitOptions) error {
	secs := func(d float64) string { return fmt.Sprintf("%.3f", d) }
	root := junitSuites{Name: "loupe eval", Time: secs(0)}
	if o.Times {
		root.Time = secs(rep.Elapsed.Seconds())
	}
	idx := map[*eval.File]int{}
	var suiteSecs []float64
	for _, r := range rep.Results {
		i, ok := idx[r.File]
		if !ok {
			i = len(root.Suites)
			idx[r.File] = i
			name := ""
			if r.File != nil {
				name = r.File.Path
			}
			root.Suites = append(root.Suites, junitSuite{Name: name, Properties: []junitProperty{
				{"mode", rep.Mode.String()}, {"threshold", fmt.Sprintf("%g", rep.Threshold)}, {"target", rep.Target},
			}})
			if o.Baseline != "" {
				root.Suites[i].Properties = append(root.Suites[i].Properties, junitProperty{"baseline", o.Baseline})
			}
		}
		s := &root.Suites[i]
		c := junitCase{Name: r.Case.ID, Time: secs(0)}
		if r.File != nil {
			c.Classname = suiteName(r.File.Path)
		}
		if o.Times {
			c.Time = secs(r.Elapsed.Seconds())
			for len(suiteSecs) <= i {
				suiteSecs = append(suiteSecs, 0)
			}
			suiteSecs[i] += r.Elapsed.Seconds()
		}
		cr := r.Result
		notRun := graderProblems(cr)
		switch {
		case cr.Verdict == eval.Fail && len(notRun) > 0:
			c.Error = &junitMessage{
				Message: fmt.Sprintf("%d grader(s) could not run", len(notRun)),
				Type:    "grader",
				Text:    cr.Explain(),
			}
			s.Errors++
		case cr.Verdict == eval.Fail:
			c.Failure = &junitMessage{
				Message: fmt.Sprintf("score %.2f is below the threshold %.2f", cr.Score, cr.Threshold),
				Type:    "trajectory",
				Text:    cr.Explain(),
			}
			s.Failures++
		case cr.Verdict == VerdictError:
			c.Error = &junitMessage{Message: "the run could not be produced", Type: "target", Text: r.Err.Error()}
			s.Errors++
		case cr.Verdict == eval.Pass:
			c.SystemOut = fmt.Sprintf("score %.2f (threshold %.2f)", cr.Score, cr.Threshold)
		default:
			var reasons []string
			for _, a := range cr.Assertions {
				if a.Reason != "" {
					reasons = append(reasons, a.Name+": "+a.Reason)
				}
			}
			c.Skipped = &junitMessage{Message: "nothing to grade", Text: strings.Join(reasons, "\n")}
			s.Skipped++
		}
		if msg, ok := o.Regressions[r.Case.ID]; ok {
			switch {
			case c.Failure != nil:
				c.Failure.Type, c.Failure.Message = "regression", msg+"; "+c.Failure.Message
			case c.Error != nil:
				c.Error.Type, c.Error.Message = "regression", msg+"; "+c.Error.Message
			}
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range root.Suites {
		s := &root.Suites[i]
		s.Time = secs(0)
		if o.Times && i < len(suiteSecs) {
			s.Time = secs(suiteSecs[i])
		}
		root.Tests += s.Tests
		root.Failures += s.Failures
		root.Errors += s.Errors
		root.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(root); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// graderProblems lists "name: reason" for each grader of cr that could not
// run.
func graderProblems(cr eval.CaseResult) []string {
	var out []string
	for _, a := range cr.Assertions {
		if a.Verdict == eval.CouldNotRun {
			out = append(out, a.Name+": "+a.Reason)
		}
	}
	return out
}
