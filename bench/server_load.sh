#!/usr/bin/env bash
# pagoda-server under load on s15m: one run of the same workload in-process and over HTTP
# (throughput comparison; it also warms the server up), then PASSES (default 5) HTTP passes
# with C concurrent streaming clients (default 256) of which one in ten drops its stream
# half-way: every request must complete or be cancelled, the KV pages must all come back, and
# the server's RSS after each pass must stay where it was after the warm-up.
#   bench/server_load.sh [BUILD_DIR] [extra pagoda-loadgen flags]
set -euo pipefail
build=${1:-build/release}
shift || true
passes=${PASSES:-5}
bin=$build/examples
mkdir -p "$build/models"
model=$build/models/s15m.gguf
[[ -f $model ]] || "$bin/pagoda-synth" --preset s15m -o "$model"

workload=(-m "$model" -c 256 -n 768 --prompt-len 16:64 --output-len 32:128 --seed 7 "$@")
log=$(mktemp)
"$bin/pagoda-server" -m "$model" --port 0 --max-running 256 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 300); do grep -q 'listening on' "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1)
rss() { awk '/VmRSS/ {rss = $2} /Threads/ {threads = $2} END {printf "%d MB, %d threads\n", rss / 1024, threads}' "/proc/$server/status"; }
# The server's CPU seconds so far (user + system), to set its tokens against its CPU time.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$server/stat"; }

echo "commit $(git -C "$(dirname "$0")" rev-parse --short HEAD), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server RSS at start: $(rss)"
cpu_before=$(cpu)
"$bin/pagoda-loadgen" "${workload[@]}" --url "$url"
echo "server CPU during the http run: $(awk -v a="$cpu_before" -v b="$(cpu)" 'BEGIN {printf "%.1f s", b - a}')"
echo "server RSS after warm-up: $(rss)"
for pass in $(seq "$passes"); do
  "$bin/pagoda-loadgen" "${workload[@]}" --seed $((7 + pass)) --url "$url" --mode http --disconnect 0.1 |
    grep -E '^(requests|dropped|failed|generated|throughput|TTFT p50|server)' || echo "pagoda-loadgen: exit status $?"
  echo "server RSS after disconnect pass $pass: $(rss)"
done
curl -s "$url/metrics" | grep -E '^pagoda_(requests_total|kv_pages_(used|cached|free)|num_requests_running)'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
