#!/usr/bin/env bash
# Fails when a C++ source or header is not as .clang-format writes it (clang-format 14, Debian
# 12's). Fix with `git clang-format` for a change, or by running this script with --fix.
set -euo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.h' '*.cpp')
if [[ "${1:-}" == "--fix" ]]; then
  "$format" -i "${files[@]}"
else
  "$format" --dry-run -Werror "${files[@]}"
fi
