#!/bin/sh
# Run the AgentV 4.42.4 CLI on the eval file a Loupe dataset exports as
# (dataset/testdata/agentv/export.eval.yaml, pinned by TestExportGolden)
# with the recorded runs of dataset/testdata/agentv/transcript.jsonl, and
# print one line per test: id, case score, pass (score >= 0.8). Compare
# with agentvVerdicts in dataset/agentv_test.go. Optional: needs node/npm
# and the npm registry (see scripts/agentv-ref.sh); not part of `go test`.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ref=${AGENTV_REF_DIR:-/tmp/agentv-ref}
mkdir -p "$ref"
if [ ! -x "$ref/node_modules/.bin/agentv" ]; then
	(cd "$ref" && npm init -y >/dev/null && npm install --no-audit --no-fund agentv@4.42.4 >/dev/null)
fi
out=$(mktemp -d)
cp "$root/dataset/testdata/agentv/export.eval.yaml" "$root/dataset/testdata/agentv/transcript.jsonl" "$out/"
(cd "$out" && "$ref/node_modules/.bin/agentv" eval run export.eval.yaml --transcript transcript.jsonl -o run 2>&1 >/dev/null | grep -i -e warn -e error >&2) || true
node -e '
const fs = require("fs");
for (const line of fs.readFileSync(process.argv[1], "utf8").split("\n")) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  const s = (r.scores || []).map(x => `${x.type}=${+x.score.toFixed(4)}/${x.verdict}`).join(" ");
  console.log(`${r.test_id.padEnd(24)} ${String(+r.score.toFixed(4)).padEnd(7)} ${r.score >= 0.8 ? "pass" : "fail"} ${s}${r.error ? " error=" + r.error : ""}`);
}' "$out/run/index.jsonl"
rm -rf "$out"
