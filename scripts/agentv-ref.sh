#!/bin/sh
# Re-run the AgentV 4.42.4 reference on eval/testdata/agentv-ref and print
# one line per test: id, case score, per-assertion score/verdict. Compare
# with the agentvScore column of eval/ref_test.go. Optional: needs node/npm
# and network access to the npm registry; not part of `go test`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${AGENTV_REF_DIR:-/tmp/agentv-ref}
mkdir -p "$ref"
if [ ! -x "$ref/node_modules/.bin/agentv" ]; then
	(cd "$ref" && npm init -y >/dev/null && npm install --no-audit --no-fund agentv@4.42.4 >/dev/null)
fi
out=$(mktemp -d)
cp "$root/eval/testdata/agentv-ref/cases.yaml" "$root/eval/testdata/agentv-ref/transcript.jsonl" "$out/"
(cd "$out" && "$ref/node_modules/.bin/agentv" eval run cases.yaml --transcript transcript.jsonl -o run >/dev/null 2>&1) || true
node -e '
const fs = require("fs");
for (const line of fs.readFileSync(process.argv[1], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  const s = (r.scores || []).map(x => `${x.type}=${+x.score.toFixed(4)}/${x.verdict}`).join(" ");
  console.log(`${r.test_id.padEnd(34)} ${String(+r.score.toFixed(4)).padEnd(7)} ${s}`);
}' "$out/run/index.jsonl"
rm -rf "$out"
