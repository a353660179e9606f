#!/usr/bin/env bash
# Installs the OpenTelemetry JS SDK (pinned in server/testdata/otel-js/package.json
# and package-lock.json) that the collector's tests use as a real OTLP client.
# Needs node and npm (Debian: apt-get install nodejs npm). Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../server/testdata/otel-js"
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "otel-js.sh: npm is missing; the OTel JS SDK tests will skip (and fail under CI=true)" >&2
    exit 0
  fi
fi
if [ -d node_modules/@opentelemetry/sdk-trace-base ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
