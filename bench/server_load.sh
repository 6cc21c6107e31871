#!/usr/bin/env bash
# pagoda-server under load on s15m: one run of the same workload in-process and over HTTP
# (throughput comparison), then two HTTP passes with C concurrent streaming clients (default
# 256) of which one in ten drops its stream half-way: every request must complete or be
# cancelled, the KV pages must all come back, and the server's RSS must not grow from the first
# pass to the second.
#   bench/server_load.sh [BUILD_DIR] [extra pagoda-loadgen flags]
set -euo pipefail
build=${1:-build/release}
shift || true
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
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$server/status"; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/pagoda-loadgen" "${workload[@]}" --url "$url"
echo "server RSS after warm-up: $(rss)"
for pass in 1 2; do
  "$bin/pagoda-loadgen" "${workload[@]}" --url "$url" --mode http --disconnect 0.1 | grep -E '^(requests|generated|throughput|TTFT p50|server)'
  echo "server RSS after disconnect pass $pass: $(rss)"
done
curl -s "$url/metrics" | grep -E '^pagoda_(requests_total|kv_pages_(used|free)|num_requests_running) '
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
