#!/bin/sh
# Re-run the AgentV 4.42.4 reference on eval/testdata/agentv-ref and print
# one line per test: id, case score, per-assertion score/verdict. Compare
# with the agentvScore columns of eval/ref_test.go. Optional: needs node/npm
# and network access to the npm registry; not part of `go test`.
#
#   scripts/agentv-ref.sh            cases.yaml with transcript.jsonl
#   scripts/agentv-ref.sh loading    loading.yaml with loading-transcript.jsonl
#   scripts/agentv-ref.sh graders    graders.yaml (code graders) likewise
#
# AgentV's own warnings (graders it skips) go to standard error.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${AGENTV_REF_DIR:-/tmp/agentv-ref}
mkdir -p "$ref"
if [ ! -x "$ref/node_modules/.bin/agentv" ]; then
	(cd "$ref" && npm init -y >/dev/null && npm install --no-audit --no-fund agentv@4.42.4 >/dev/null)
fi
name=${1:-cases}
cases=$name.yaml transcript=$name-transcript.jsonl
[ "$name" = cases ] && transcript=transcript.jsonl
out=$(mktemp -d)
cp -R "$root/eval/testdata/agentv-ref/." "$out/"
(cd "$out" && "$ref/node_modules/.bin/agentv" eval run "$cases" --transcript "$transcript" -o run 2>&1 >/dev/null | grep -i warn >&2) || true
node -e '
const fs = require("fs");
for (const line of fs.readFileSync(process.argv[1], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  const s = (r.scores || []).map(x => `${x.type}=${+x.score.toFixed(4)}/${x.verdict}`).join(" ");
  console.log(`${r.test_id.padEnd(34)} ${String(+r.score.toFixed(4)).padEnd(7)} ${s}${r.error ? " error=" + r.error : ""}`);
}' "$out/run/index.jsonl"
rm -rf "$out"
