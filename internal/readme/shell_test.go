package readme_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loupe-dev/loupe/internal/testrepo"
)

// shellLine is one command of a ```sh block of README.md.
type shellLine struct {
	cmd  string // the command, without its trailing comment
	line int    // its line in README.md
}

// shellLines returns the commands of the ```sh blocks of markdown: one per
// line, blank lines and comments left out.
func shellLines(markdown string) []shellLine {
	var out []shellLine
	in := false
	for i, l := range strings.Split(markdown, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in = true
		case in && strings.TrimSpace(l) == "```":
			in = false
		case in:
			if c := stripComment(l); c != "" {
				out = append(out, shellLine{cmd: c, line: i + 1})
			}
		}
	}
	return out
}

// stripComment removes a trailing "# …" comment that is outside quotes.
func stripComment(l string) string {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return strings.TrimSpace(l[:i])
		}
	}
	return strings.TrimSpace(l)
}

// step says what the test does with one README command.
type step struct {
	skip  string   // non-empty: not run, for this reason
	dir   string   // "checkout": run from the repository root; default the temp dir
	want  []string // substrings of the standard output (the output the README shows or describes)
	files []string // files the command must leave in the temp dir
	serve bool     // a collector: started, checked, left running for the next commands
	after string   // run after the command so that the commands after it find what they show
	exit  int      // the exit status the README says the command ends with (0 when it says none)
}

// readmeCommands lists every command of README.md's ```sh blocks, exactly
// as printed, with what the test does with it. A command added to or
// changed in the README without a line here fails the test, and so does a
// line here that the README no longer has.
var readmeCommands = map[string]step{
	// Quick start.
	"go run ./cmd/loupe demo": {want: []string{"answer: ", "see it again with: loupe traces show "}, files: []string{"loupe-demo.jsonl"}},
	"./scripts/test.sh":       {skip: "the whole test suite (this test included) and it installs system packages; CI runs it"},
	// Install.
	"go install github.com/loupe-dev/loupe/cmd/loupe@latest": {skip: "needs the network (the Go module proxy) and a published release; the next line installs from this checkout"},
	"go install ./cmd/loupe":                                 {dir: "checkout", files: []string{"gobin/loupe"}},
	"loupe version":                                          {want: []string{"loupe "}},
	// Storing and browsing traces (README ids stand for the demo's trace).
	"loupe traces ls":                     {want: []string{"ID", "NAME", "STARTED", "DURATION", "STATUS", "STEPS", "TOOLS", "TOKENS", "COST", "demo"}},
	"loupe traces show 2d9e96bf87fe --io": {want: []string{"demo", "in: ", "out: ", "tool clock"}},
	`loupe traces search 'tool:clock type:tool.error since:24h "time zone"'`: {want: []string{"tool.error clock", "time zone"}},
	"loupe traces export --since 24h -o last-day.jsonl":                      {files: []string{"last-day.jsonl"}},
	"loupe traces import run.jsonl static-trace.json session.trace.json otel-traces.jsonl": {
		want: []string{"run.jsonl: loupe", "static-trace.json: agentv", "session.trace.json: omni", "otel-traces.jsonl: otel-jsonl"}},
	"loupe traces rm 2d9e96bf87fe":                                          {after: "loupe traces import run.jsonl"},
	"loupe traces prune --older-than 720h":                                  {},
	"loupe --db postgres://loupe@db.internal/loupe traces import run.jsonl": {want: []string{"run.jsonl: loupe"}}, // against LOUPE_TEST_POSTGRES; testrepo.Missing without it
	"loupe --db postgres://loupe@db.internal/loupe traces ls":               {want: []string{"ID", "NAME"}},
	// Send traces from any agent.
	"loupe serve": {serve: true},
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python my_agent.py":                                        {skip: "my_agent.py is the reader's own agent"},
	"curl -s 'http://127.0.0.1:4318/api/v1/traces?since=24h&tool=search&limit=20'":                                {want: []string{`"traces":`}},
	"curl -s 'http://127.0.0.1:4318/api/v1/search' --data-urlencode 'q=type:tool.error \"time zone\"' -G":         {want: []string{`"type":"tool.error"`}},
	"curl -s  http://127.0.0.1:4318/api/v1/traces/2d9e96bf87fe":                                                   {want: []string{`"summary":`, `"name":"demo"`}},
	"curl -s 'http://127.0.0.1:4318/api/v1/aggregates?since=7d'":                                                  {want: []string{`"by_model":`, `"demo-model"`}},
	"curl -s  http://127.0.0.1:4318/api/v1/evaluations":                                                           {want: []string{`"traces":`}}, // loupe eval runs are traces tagged loupe:eval
	"curl -N  http://127.0.0.1:4318/api/v1/stream":                                                                {skip: "a live stream does not end; the server's tests read it"},
	"curl -N  http://127.0.0.1:4318/api/v1/traces/<trace id>/stream":                                              {skip: "a live stream does not end; the server's tests read it"},
	"curl -s -X DELETE http://127.0.0.1:4318/api/v1/traces/<trace id>":                                            {want: []string{`"deleted":1`}},
	"curl -s -H \"Content-Type: application/x-ndjson\" --data-binary @run.jsonl http://127.0.0.1:4318/v1/records": {want: []string{`"accepted":42`, `"added":42`}},
	"loupe keys create --scope ingest":                                                                            {want: []string{"lk_"}},
	"loupe keys create --scope read":                                                                              {want: []string{"lk_"}},
	"loupe keys ls ; loupe keys revoke <id>":                                                                      {want: []string{"ID", "SCOPE", "ingest", "read"}},
	`OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer lk_…" python my_agent.py`:                                   {skip: "my_agent.py is the reader's own agent"},
	// Replay a run (the README's second id stands for the branch the line before it stores).
	"loupe replay 2d9e96bf87fe": {want: []string{"no divergence"}},
	`loupe replay 2d9e96bf87fe --from-step 3 --model scripted:turns.yaml --system "Answer in one sentence."`: {want: []string{"new run: ", "replay-of:"}},
	"loupe traces diff 2d9e96bf87fe 7c01d2a9e4b3":                                                            {want: []string{"≠"}},
	"loupe serve --branch-models scripted:turns.yaml,openai:gpt-4o-mini --branch-max-cost 0.25":              {serve: true},
	`curl -s -X POST http://127.0.0.1:4318/api/v1/traces/2d9e96bf87fe/branch -H 'Content-Type: application/json' -d '{"step": 3, "model": "scripted:turns.yaml"}'`: {
		want: []string{`"trace_id":`, `"from_step":3`, `"compare":"/api/v1/traces/diff?a=`}},
	// Pipelines (the files are the real ones of the checkout).
	"loupe pipeline validate testdata/real/omni/*.yaml testdata/real/ultrarag/*.yaml":      {dir: "checkout", want: []string{"demo-loop.yaml: valid (omni)", "vanilla_rag.yaml: valid (ultrarag)"}},
	"loupe pipeline graph testdata/real/omni/ultrarag_complex.yaml":                        {dir: "checkout", want: []string{"flowchart"}},
	`loupe pipeline run testdata/real/omni/demo-loop.yaml --param topic="typed languages"`: {dir: "checkout", want: []string{"tool generator.analyze", "branch check_quality", "memory pool:"}},
	// Look at runs in a browser.
	"loupe demo": {want: []string{"answer: "}},
	// Run Loupe for a team.
	`export LOUPE_DB='postgres://loupe@db.internal/loupe?sslmode=verify-full'`:                                      {skip: "the team's own PostgreSQL; the store tests run against LOUPE_TEST_POSTGRES"},
	"loupe keys create --scope admin --name ops":                                                                    {want: []string{"lk_"}},
	"loupe keys create --scope ingest --name agents":                                                                {want: []string{"lk_"}},
	"loupe serve --addr 0.0.0.0:4318 --grpc-addr 0.0.0.0:4317 --public-host loupe.internal --retain 30d":            {skip: "listens on every interface of a shared host; cmd/loupe's tests run collectors with keys, retention and PostgreSQL"},
	"loupe serve --addr 0.0.0.0:4318 --read-db 'postgres://loupe_ro@db-replica.internal/loupe?sslmode=verify-full'": {skip: "the team's own replica; TestServeReadDB (cmd/loupe) runs a collector with --read-db on a role that may only SELECT"},
	"curl -s http://127.0.0.1:4318/api/v1/retention":                                                                {want: []string{`"period":`, `"stats":`}},
	"loupe projects add team_a":                                                                                     {want: nil},
	"loupe keys create --scope ingest --name team-a-agents --projects team_a":                                       {want: []string{"lk_"}},
	"loupe --project team_a traces ls":                                                                              {want: nil},
	"curl -s http://127.0.0.1:4318/api/v1/projects":                                                                 {want: []string{`{"name":"default"}`, `"name":"team_a"`, `"current":"default"`}},
	"loupe serve --rules team_a=rules.yaml --monitors team_a=monitors.yaml":                                         {serve: true},
	"curl -s -H 'Loupe-Project: team_a' http://127.0.0.1:4318/api/v1/monitors":                                      {want: []string{`"name":"prod-errors"`}},
	"curl -s -X DELETE http://127.0.0.1:4318/api/v1/projects/team_a":                                                {want: []string{`"name":"team_a"`, `"keys_revoked":["`}, after: "loupe projects add team_a"},
	"loupe projects rm team_a --yes":                                                                                {},

	// From traces to quality: group runs by session (the collector of the
	// section before is still running).
	"loupe demo --session conv-1 --user ada":                            {want: []string{"answer: "}},
	"loupe sessions ls":                                                 {want: []string{"SESSION", "USER", "RUNS", "conv-1", "ada"}},
	"loupe sessions show conv-1":                                        {want: []string{"session conv-1", "user ada", "2 runs", "  > What is 17%", "  · calculator(", "  < "}},
	"loupe traces ls --session conv-1 --user ada":                       {want: []string{"SESSION", "conv-1", "demo"}},
	"curl -s 'http://127.0.0.1:4318/api/v1/sessions?user=ada&since=7d'": {want: []string{`"sessions":[{"session":"conv-1","user":"ada","runs":2`}},
	"curl -s  http://127.0.0.1:4318/api/v1/sessions/conv-1":             {want: []string{`"session":{"session":"conv-1"`, `"turns":[{"summary":`}},

	// Score runs by hand or by API (the collector started above still runs).
	`loupe scores add 2d9e96bf87fe thumbs true --comment "found the bug"`: {want: []string{"scored ", ": thumbs = true ("}},
	"loupe scores add 2d9e96bf87fe helpfulness 0.8":                       {want: []string{": helpfulness = 0.8 ("}},
	"loupe scores ls --trace 2d9e96bf87fe":                                {want: []string{"TARGET", "thumbs", "true", "found the bug", "helpfulness", "0.8", "human"}},
	"loupe traces search 'score:thumbs=true type:run.start'":              {want: []string{"run.start", "demo"}},
	`curl -s -X PUT http://127.0.0.1:4318/api/v1/score-configs -H 'Content-Type: application/json' -d '{"name":"helpfulness","kind":"numeric","min":0,"max":1,"description":"did the answer help"}'`: {
		want: []string{`"name":"helpfulness"`, `"max":1`}},
	`curl -s http://127.0.0.1:4318/api/v1/scores -H 'Content-Type: application/json' -d '{"scores":[{"trace_id":"<trace id>","name":"helpfulness","value":0.9,"comment":"clear"}]}'`: {
		want: []string{`"name":"helpfulness"`, `"value":0.9`, `"source":"api"`, `"skipped":0`}},
	"curl -s 'http://127.0.0.1:4318/api/v1/traces' --data-urlencode 'score=helpfulness>=0.8' -G": {want: []string{`"name":"demo"`}},
	"curl -s 'http://127.0.0.1:4318/api/v1/scores/stats?since=7d'":                               {want: []string{`"name":"helpfulness"`, `"count":2`, `"name":"thumbs"`, `"trend":`}},

	// From traces to quality: datasets, experiments, the CI gate (the
	// scripted models are written below, agent-v2.yaml as the README shows it).
	"loupe dataset add 2d9e96bf87fe --dataset demo-cases":                                    {want: []string{"dataset demo-cases@1: 1 case(s) added", "5 expected tool call(s)"}},
	"loupe dataset add --query 'tool:clock since:7d' --dataset clock-runs --limit 20":        {want: []string{"dataset clock-runs@1: "}},
	"loupe dataset export demo-cases > demo-cases.eval.yaml":                                 {files: []string{"demo-cases.eval.yaml"}},
	"sed -i.bak '/tool: clock/{N;N;/Mars/d;}' demo-cases.eval.yaml":                          {},
	"loupe dataset import demo-cases.eval.yaml --dataset demo-cases":                         {want: []string{"dataset demo-cases@2: 1 case(s) imported"}},
	"loupe dataset show demo-cases":                                                          {want: []string{"dataset demo-cases@2", "calculator → search_files → clock → summarize", "demo-cases@1"}},
	"loupe eval --dataset demo-cases --model scripted:agent-v1.yaml --experiment before-fix": {exit: 1, want: []string{"FAIL", "expected clock"}},
	"loupe eval --dataset demo-cases --model scripted:agent-v2.yaml --experiment after-fix":  {want: []string{"PASS", "1 passed"}},
	"loupe experiments diff before-fix after-fix":                                            {want: []string{"fix ", "1 fix(es)", "pass rate    0.0% (0/1)"}},
	"loupe eval --dataset demo-cases --model scripted:agent-v2.yaml --baseline after-fix --fail-on-regression --junit report.xml --summary-md summary.md": {
		want: []string{"0 regression(s)"}, files: []string{"report.xml", "summary.md"}},

	// A monitor that posts to a webhook (monitors.yaml is the README's
	// own, written from its yaml block; its filters select no demo run,
	// so nothing fires and no webhook is called).
	"loupe serve --monitors monitors.yaml":                              {serve: true},
	"curl -s http://127.0.0.1:4318/api/v1/monitors":                     {want: []string{`"name":"prod-errors"`, `"name":"slow-runs"`, `https://hooks.slack.com/services/…`}},
	"curl -s 'http://127.0.0.1:4318/api/v1/alerts?monitor=prod-errors'": {want: []string{`"firings":[]`}},

	// Grade live traffic.
	"loupe serve --rules rules.yaml":             {serve: true}, // rules.yaml is written below
	"curl -s http://127.0.0.1:4318/api/v1/rules": {want: []string{`"rules":`}},
}

// The scripted models of "Datasets, experiments and the CI gate": the
// agent before the fix stops after the clock call that fails; the agent
// after it is the file the README shows.
const (
	agentV1 = `model: agent
turns:
  - tool_calls:
      - {name: calculator, input: {expression: "2340 * 0.17 + sqrt(144)"}}
      - {name: search_files, input: {pattern: "TODO|FIXME", max: 5}}
  - tool_calls: [{name: clock, input: {zone: Mars/Olympus}}]
  - answer: 409.8; the TODOs are listed above; I could not tell the time on Mars.
`
	agentV2 = `model: agent
turns:
  - tool_calls:
      - {name: calculator, input: {expression: "2340 * 0.17 + sqrt(144)"}}
      - {name: search_files, input: {pattern: "TODO|FIXME", max: 5}}
  - tool_calls: [{name: clock, input: {zone: UTC}}]
  - tool_calls: [{name: summarize, input: {task: "Summarise the results: the calculation, the TODO search and the clock."}}]
  - answer: 409.8; the TODOs are listed above; the time on Mars is kept in UTC.
`
)

// TestREADMEShellCommands runs the commands of README.md's ```sh blocks,
// in order, as a reader would after cloning: against a loupe built from
// this checkout and put first on PATH, in a temporary folder that is also
// HOME and holds the store. It checks each exit status and, where the
// README shows or describes output, its key lines. Commands that need the
// network, a server that cannot be started here, or the reader's own
// program are listed as skipped with the reason (see readmeCommands).
//
// The README's example ids (2d9e96bf87fe, <trace id>, <id>, 7c01d2a9e4b3)
// are replaced by the demo's trace, the key just created and the run a
// replay branch stored; `go run ./cmd/loupe` runs
// the binary built from the same package; `loupe serve` listens on a free
// port instead of 4318 (which another process may hold), and the curl
// commands are pointed at it.
func TestREADMEShellCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds loupe and runs the README's commands; skipped with -short")
	}
	// The commands run with bash, as a reader's shell would, and the
	// README talks to loupe serve with curl.
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testrepo.Missing(t, tool+" is not installed: the README's commands need it (apt-get install "+tool+")")
		}
	}
	root := testrepo.Root(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "# agent-v2.yaml\n"+agentV2) {
		t.Errorf("README.md no longer shows agent-v2.yaml as agentV2 holds it: make them the same")
	}
	lines := shellLines(string(b))
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l.cmd] = true
		if _, ok := readmeCommands[l.cmd]; !ok {
			t.Errorf("README.md:%d: %q is not in readmeCommands: add it (run it, or skip it with the reason)", l.line, l.cmd)
		}
	}
	for c := range readmeCommands {
		if !seen[c] {
			t.Errorf("readmeCommands has %q, which README.md no longer shows: remove it", c)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "loupe"), "./cmd/loupe")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/loupe: %v\n%s", err, out)
	}
	// The inputs of the import line: the demo's own JSONL (written below)
	// and real files of other tools.
	for name, real := range map[string]string{
		"static-trace.json":  "agentv/static-trace.json",
		"session.trace.json": "omni/session_rag_demo.trace.json",
		"otel-traces.jsonl":  "fragola/otel-traces.jsonl",
		"turns.yaml":         "", // the live model of the replay branches (priced, so a cost limit holds)
		"agent-v1.yaml":      agentV1,
		"agent-v2.yaml":      agentV2,
		"monitors.yaml":      "", // the README's monitors file
	} {
		if real == agentV1 || real == agentV2 {
			if err := os.WriteFile(filepath.Join(tmp, name), []byte(real), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if name == "monitors.yaml" {
			if err := os.WriteFile(filepath.Join(tmp, name), []byte(readmeYAML(t, string(b), "### A monitor that posts to a webhook")), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if real == "" {
			if err := os.WriteFile(filepath.Join(tmp, name), []byte("model: branch-model\nprice: {input_per_mtok: 0, output_per_mtok: 0}\nturns:\n  - answer: It is 409.8.\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(testrepo.Real(t, real))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The rules file "Grade live traffic" shows, as a reader would save it.
	if _, after, ok := strings.Cut(string(b), "### Grade live traffic"); ok {
		if _, y, ok := strings.Cut(after, "```yaml\n"); ok {
			y, _, _ = strings.Cut(y, "```")
			if err := os.WriteFile(filepath.Join(tmp, "rules.yaml"), []byte(y), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := readerEnv(tmp, bin)

	var (
		traceID  string // the demo's trace, full
		branchID string // the run a replay branch stored, full
		keyID    string // the last key created
		srv      *server
	)
	t.Cleanup(func() { srv.stop(t) })
	for _, l := range lines {
		st := readmeCommands[l.cmd]
		name := fmt.Sprintf("README.md:%d %s", l.line, l.cmd)
		cmd := l.cmd
		if strings.Contains(cmd, "postgres://loupe@db.internal/loupe") {
			// Run against the test server. Without one, the command's
			// subtest skips, or fails under CI=true: never a silent pass.
			dsn := os.Getenv("LOUPE_TEST_POSTGRES")
			if dsn == "" {
				t.Run(name, func(t *testing.T) {
					testrepo.Missing(t, "LOUPE_TEST_POSTGRES is not set (scripts/services.sh starts PostgreSQL and sets it)")
				})
				continue
			}
			cmd = strings.Replace(cmd, "postgres://loupe@db.internal/loupe", dsn, 1)
		}
		if st.skip != "" {
			t.Logf("skipped %s: %s", name, st.skip)
			continue
		}
		cmd = strings.Replace(cmd, "go run ./cmd/loupe", "loupe", 1)
		if traceID != "" {
			cmd = strings.ReplaceAll(cmd, "2d9e96bf87fe", traceID[:12])
			cmd = strings.ReplaceAll(cmd, "<trace id>", traceID)
		}
		if branchID != "" {
			cmd = strings.ReplaceAll(cmd, "7c01d2a9e4b3", branchID[:12])
		}
		cmd = strings.ReplaceAll(cmd, "<id>", keyID)
		if srv != nil {
			cmd = strings.ReplaceAll(cmd, "127.0.0.1:4318", srv.addr)
		}
		if st.serve {
			srv.stop(t)
			srv = startServer(t, tmp, env, cmd+" --addr 127.0.0.1:0")
			continue
		}
		if strings.HasPrefix(cmd, "curl ") && srv == nil {
			t.Fatalf("%s: no collector is running (the README starts one with loupe serve before)", name)
		}
		dir := tmp
		if st.dir == "checkout" {
			dir = root
		}
		stdout, stderr, err := runShell(dir, env, cmd)
		if ee, ok := err.(*exec.ExitError); ok && st.exit != 0 && ee.ExitCode() == st.exit {
			err = nil
		} else if err == nil && st.exit != 0 {
			err = fmt.Errorf("exit status 0, the README says %d", st.exit)
		}
		if err != nil {
			t.Errorf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout, stderr)
			continue
		}
		for _, w := range st.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s: output lacks %q:\n%s", name, w, stdout)
			}
		}
		for _, f := range st.files {
			if _, err := os.Stat(filepath.Join(tmp, f)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		// What later commands need from this one.
		if m := regexp.MustCompile(`trace ([0-9a-f]{32}): `).FindStringSubmatch(stdout); m != nil {
			traceID = m[1]
			// The demo's hint must work as printed.
			hint := regexp.MustCompile(`see it again with: (loupe traces show [0-9a-f]+)`).FindStringSubmatch(stdout)
			if hint == nil {
				t.Errorf("%s: no \"see it again with\" hint naming loupe:\n%s", name, stdout)
			} else if out, errOut, err := runShell(tmp, env, hint[1]); err != nil || !strings.Contains(out, traceID) {
				t.Errorf("the demo's hint %q: %v\n%s%s", hint[1], err, out, errOut)
			}
			data, err := os.ReadFile(filepath.Join(tmp, "loupe-demo.jsonl"))
			if err == nil {
				err = os.WriteFile(filepath.Join(tmp, "run.jsonl"), data, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if m := regexp.MustCompile(`new run: ([0-9a-f]{32})`).FindStringSubmatch(stdout); m != nil {
			branchID = m[1]
		}
		if m := regexp.MustCompile(`^lk_([0-9a-f]+)_`).FindStringSubmatch(stdout); m != nil {
			keyID = m[1]
		}
		if st.after != "" {
			if out, errOut, err := runShell(tmp, env, st.after); err != nil {
				t.Fatalf("%s, then %s: %v\n%s%s", name, st.after, err, out, errOut)
			}
		}
	}
}

// readmeYAML returns the first ```yaml block of markdown after the line
// heading.
func readmeYAML(t *testing.T, markdown, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(markdown, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	if !ok {
		t.Fatalf("README.md has no yaml block after %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// readerEnv is the environment of a reader on a fresh machine: HOME and
// the store in tmp, the loupe just built first on PATH, go install writing
// to tmp/gobin, and no Loupe settings inherited from this process.
func readerEnv(tmp, bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LOUPE_") || strings.HasPrefix(k, "XDG_") || k == "HOME" || k == "PATH" || k == "GOBIN" {
			continue
		}
		env = append(env, kv)
	}
	gocache, _ := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	vals := strings.Fields(string(gocache))
	if len(vals) == 3 { // keep the caches: HOME moved, the compiled packages did not
		env = append(env, "GOCACHE="+vals[0], "GOMODCACHE="+vals[1], "GOPATH="+vals[2])
	}
	return append(env, "HOME="+tmp, "XDG_DATA_HOME="+filepath.Join(tmp, "data"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"GOBIN="+filepath.Join(tmp, "gobin"), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// runShell runs cmd with bash in dir and returns its output.
func runShell(dir string, env []string, cmd string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", cmd)
	c.Dir, c.Env = dir, env
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	return out.String(), errOut.String(), err
}

// server is a running `loupe serve`.
type server struct {
	cmd     *exec.Cmd
	addr    string
	done    chan error
	stopped bool
}

// startServer starts cmd (a loupe serve line) in dir and waits until it
// says where it listens, then checks that it answers.
func startServer(t *testing.T, dir string, env []string, cmd string) *server {
	t.Helper()
	c := exec.Command("bash", "-c", "exec "+cmd)
	c.Dir, c.Env = dir, env
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: c, done: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on http://(\S+?),`).FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		s.done <- c.Wait()
	}()
	select {
	case s.addr = <-found:
	case err := <-s.done:
		t.Fatalf("%s exited before listening: %v", cmd, err)
	case <-time.After(30 * time.Second):
		c.Process.Kill()
		t.Fatalf("%s did not say where it listens within 30s", cmd)
	}
	out, errOut, err := runShell(dir, env, "curl -sf http://"+s.addr+"/")
	if err != nil || !strings.Contains(strings.ToLower(out), "<!doctype html>") {
		t.Errorf("%s: GET / (the web UI): %v\n%s%s", cmd, err, firstN(out, 300), errOut)
	}
	return s
}

// stop interrupts the server, as Ctrl-C does, and checks it exits cleanly.
func (s *server) stop(t *testing.T) {
	if s == nil || s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("loupe serve after SIGINT: %v", err)
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("loupe serve did not stop within 30s of SIGINT")
	}
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
