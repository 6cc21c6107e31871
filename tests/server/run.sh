#!/usr/bin/env bash
# CTest's entry to the Node suite: skips (status 77) with the reason when the openai package is
# not installed (scripts/test.sh runs `npm ci` here first).
set -euo pipefail
cd "$(dirname "$0")"
if [[ ! -d node_modules/openai ]]; then
  echo "SKIP: tests/server/node_modules is missing; run 'npm ci' in tests/server"
  exit 77
fi
# abuse.test.mjs holds 1,000 sockets open, and the server as many: as many descriptors as allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec node --test "$@"
