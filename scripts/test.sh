#!/usr/bin/env bash
# Runs Loupe's whole test suite on a fresh machine: installs what the tests
# need, starts servers on 127.0.0.1 only, then runs vet, staticcheck and
# go test -race. Usage: ./scripts/test.sh [go test flags/packages]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH="$(go env GOPATH)/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "tools"
if ! command -v staticcheck >/dev/null 2>&1; then
  go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

# Servers the tests use are started by scripts/services.sh, which exports
# their addresses (e.g. LOUPE_TEST_POSTGRES) for the tests.
if [ -f scripts/services.sh ]; then
  step "services"
  # shellcheck source=/dev/null
  source scripts/services.sh
fi

# The OpenTelemetry JS SDK, a real OTLP client for the collector's tests.
step "otel-js"
./scripts/otel-js.sh

# The MCP reference servers and the MCP TypeScript SDK (its client), real
# peers for package mcp's and the loupe mcp server's tests.
step "mcp-js"
./scripts/mcp-js.sh

# Headless Chromium for the web UI's browser tests (package ui, driven by
# chromedp). They skip without it, except under CI=true, where they fail.
step "chromium"
if [ ! -x /usr/bin/chromium ] && [ -z "${LOUPE_CHROMIUM:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and this is not root: the browser tests will skip (fail under CI=true); install it with: sudo apt-get install -y chromium"
  fi
fi

# Graphviz renders the pipeline graphs' DOT golden files (package pipeline).
step "graphviz"
if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
  else
    echo "graphviz is missing and this is not root: the DOT rendering test will skip (fail under CI=true); install it with: sudo apt-get install -y graphviz"
  fi
fi

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then
  echo "gofmt would change:"; echo "$bad"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
staticcheck ./...

# interop/ and each adapter under adapters/ are modules of their own
# (interoperability tests against third-party SDKs, and the in-process
# adapters for other Go agent frameworks), so that their dependencies never
# become Loupe's; ./... above does not reach them: check, vet and test each
# here. go mod tidy -diff fails when a module's go.mod or go.sum is stale.
# interop's benchmarks run on demand (see interop/doc.go).
for mod in interop adapters/*/; do
  [ -f "$mod/go.mod" ] || continue
  mod=${mod%/}
  step "$mod module: tidy, vet, staticcheck, test"
  (cd "$mod" && go mod tidy -diff && go vet ./... && staticcheck ./... && go test -race -count=1 ./...)
done

step "go test -race"
go test -race -count=1 "${@:-./...}"

# The fuzz targets that guard the collector against hostile input run
# briefly on every run (their seed corpora also run in go test above):
# the nesting guards checked against pdata's decoders, numeric
# validation, UTF-8 repair and the records decoder. LOUPE_FUZZTIME
# lengthens them (e.g. 5m before a release).
if [ $# -eq 0 ]; then
  step "fuzz (short)"
  for target in otlp:FuzzProtoNesting otlp:FuzzJSONNesting store:FuzzSanitize store:FuzzValidateRecord server:FuzzIngest; do
    pkg=${target%%:*} name=${target##*:}
    go test -run='^$' -fuzz="^${name}\$" -fuzztime="${LOUPE_FUZZTIME:-8s}" "./$pkg"
  done
fi
