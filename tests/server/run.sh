#!/usr/bin/env bash
# CTest's entry to the Node suite: skips (status 77) with the reason when the openai package is
# not installed (scripts/test.sh runs `npm ci` here first).
set -euo pipefail
cd "$(dirname "$0")"
if [[ ! -d node_modules/openai ]]; then
  echo "SKIP: tests/server/node_modules is missing; run 'npm ci' in tests/server"
  exit 77
fi
exec node --test "$@"
