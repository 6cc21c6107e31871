#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, the `fuzz` preset: clang, ASan + UBSan) and runs
# each for a bounded time: `scripts/fuzz.sh [SECONDS_EACH] [HARNESS...]` (default 60 s, all).
# Each starts from its committed seeds and crash regressions; new corpus entries go to a
# scratch directory, not into the checkout. Fails on the first finding: the crashing input is
# left in build/fuzz/findings/<harness>/ — commit it to tests/fuzz/regressions/<harness>/ with
# the fix, and the Release/ASan runs replay it from then on (FuzzReplay.* tests).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
jobs=$(nproc)

cmake --preset fuzz -DPAGODA_WERROR=ON
cmake --build --preset fuzz -j "$jobs"

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
for h in "${harnesses[@]}"; do
  scratch=build/fuzz/corpus/$h
  findings=build/fuzz/findings/$h
  mkdir -p "$scratch" "$findings" "tests/fuzz/corpus/$h"
  dict=()
  [ -f "tests/fuzz/$h.dict" ] && dict=(-dict="tests/fuzz/$h.dict")
  case $h in fuzz_gguf|fuzz_model_loader|fuzz_lora) dict=(-dict=tests/fuzz/gguf.dict) ;; esac
  regressions=()
  [ -d "tests/fuzz/regressions/$h" ] && regressions=("tests/fuzz/regressions/$h")
  echo "== $h: ${seconds}s"
  # -rss_limit_mb leaves room for ASan; a leak is a finding too.
  log=build/fuzz/logs/$h.log
  mkdir -p build/fuzz/logs
  set +e
  "build/fuzz/tests/fuzz/$h" "$scratch" "tests/fuzz/corpus/$h" "${regressions[@]}" "${dict[@]}" \
    -max_total_time="$seconds" -max_len=65536 -timeout=25 -rss_limit_mb=4096 \
    -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  grep -E "^(stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb))|DONE" "$log" || true
  echo "corpus: $(find "$scratch" "tests/fuzz/corpus/$h" -type f | wc -l) inputs"
  if [ "$status" -ne 0 ]; then
    tail -60 "$log" >&2
    echo "fuzz.sh: $h found a problem (exit $status); inputs in $findings, log in $log" >&2
    exit 1
  fi
done
echo "fuzz.sh: no findings"
