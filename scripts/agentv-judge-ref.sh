#!/bin/sh
# Re-record eval/testdata/agentv-ref/judge/reference*.json: AgentV 4.42.4 runs
# the judge graders of cases.yaml with the mock agent and mock judge of
# targets.yaml (and of targets-unreadable.yaml, whose judge does not answer
# JSON), and its results keep, per grader, the prompts it sent the judge and
# the score it gave. eval/judge_ref_test.go holds Loupe's prompts
# and scores to these. Optional: needs node/npm and the npm registry (see
# scripts/agentv-ref.sh); not part of `go test`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${AGENTV_REF_DIR:-/tmp/agentv-ref}
mkdir -p "$ref"
if [ ! -x "$ref/node_modules/.bin/agentv" ]; then
	(cd "$ref" && npm init -y >/dev/null && npm install --no-audit --no-fund agentv@4.42.4 >/dev/null)
fi
# record TARGETS OUTPUT [CASES TARGET]: grade CASES (cases.yaml) with the
# target TARGET (default) of TARGETS, write OUTPUT.
record() {
	out=$(mktemp -d)
	mkdir -p "$out/.agentv"
	cp "$root/eval/testdata/agentv-ref/judge/${3:-cases.yaml}" "$root/eval/testdata/agentv-ref/judge/agent-tools.json" "$root/eval/testdata/agentv-ref/judge/agent-tools-order.json" "$out/"
	cp "$root/eval/testdata/agentv-ref/judge/$1" "$out/.agentv/targets.yaml"
	(cd "$out" && "$ref/node_modules/.bin/agentv" eval run "${3:-cases.yaml}" --target "${4:-default}" -o run >/dev/null 2>&1) || true
	node -e '
const fs = require("fs");
const rows = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(l => l.trim()).map(l => JSON.parse(l));
const out = rows.map(r => ({
  test_id: r.test_id, score: r.score, execution_status: r.execution_status,
  scores: (r.scores || []).map(s => ({name: s.name, type: s.type, score: s.score, verdict: s.verdict,
    assertions: s.assertions, system: s.input && s.input.systemPrompt, user: s.input && s.input.userPrompt})),
})).sort((a, b) => a.test_id < b.test_id ? -1 : 1);
process.stdout.write(JSON.stringify(out, null, 2) + "\n");
' "$out/run/index.jsonl" > "$root/eval/testdata/agentv-ref/judge/$2"
	rm -rf "$out"
}
record targets.yaml reference.json
record targets-unreadable.yaml reference-unreadable.json
record targets.yaml reference-tools.json tool-cases.yaml tools
record targets.yaml reference-tools-order.json tool-order-cases.yaml tools-order
