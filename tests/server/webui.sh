#!/usr/bin/env bash
# CTest's entry to the chat page's browser test: skips (status 77) with the reason when Debian's
# chromium or chromium-driver package is not installed (scripts/install-deps.sh installs both).
set -euo pipefail
cd "$(dirname "$0")"
for program in chromium chromedriver; do
  if ! command -v "$program" >/dev/null; then
    echo "SKIP: $program is not installed (Debian packages chromium and chromium-driver)"
    exit 77
  fi
done
exec node --test webui.test.mjs
