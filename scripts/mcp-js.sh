#!/usr/bin/env bash
# Installs the real MCP peers the mcp tests talk to (pinned in testdata/mcp-js/package.json
# and package-lock.json): the reference servers server-everything and
# server-filesystem, and the TypeScript SDK whose client the tests drive.
# Needs node and npm (Debian: apt-get install nodejs npm). Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../testdata/mcp-js"
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "mcp-js.sh: npm is missing; the MCP interop tests will skip (and fail under CI=true)" >&2
    exit 0
  fi
fi
if [ -d node_modules/@modelcontextprotocol/server-filesystem ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
