#!/usr/bin/env bash
# How close a quantization of a model stays to its original: pagoda-quantize writes each
# TYPE, then pagoda-perplexity teacher-forces tests/data/tiny_stories.txt (chunks of 256, BOS
# first) and pagoda-generate runs tests/data/story_prompts.jsonl greedily (64 tokens) on the
# original and on each quantization. Prints, per TYPE: perplexity, the share of positions
# whose argmax agrees with the original's, and how many greedy outputs are identical (with
# the mean common prefix).
#   bench/quant_agreement.sh [MODEL.gguf] [TYPE...]   (default: stories260K, q8_0 q4_0)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${PAGODA_BIN:-$root/build/release/examples}
model=${1:-$root/../shared/models/stories260K/stories260K.gguf}
shift || true
if [ $# -gt 0 ]; then types=("$@"); else types=(q8_0 q4_0); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

score() {  # MODEL NAME: perplexity JSON and greedy JSONL under $work
  "$bin/pagoda-perplexity" -m "$1" -f "$root/tests/data/tiny_stories.txt" -c 256 --cache-type f32 --json "$work/$2.ppl.json" >/dev/null 2>&1
  "$bin/pagoda-generate" -m "$1" --prompts "$root/tests/data/story_prompts.jsonl" --temp 0 -n 64 >"$work/$2.gen.jsonl" 2>/dev/null
}

score "$model" original
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %22s %24s\n' type ppl "argmax == original" "greedy == original"
printf '%-8s %10.4f %22s %24s\n' F32 "$(jq .ppl "$work/original.ppl.json")" - -
for type in "${types[@]}"; do
  "$bin/pagoda-quantize" "$model" "$work/$type.gguf" "$type" >"$work/$type.log"
  score "$work/$type.gguf" "$type"
  read -r same total < <(jq -n -r --slurpfile a "$work/original.ppl.json" --slurpfile b "$work/$type.ppl.json" '
    [range(0; $a[0].sequences | length) as $s | range(0; $a[0].sequences[$s].argmax | length) as $i
     | $a[0].sequences[$s].argmax[$i] == $b[0].sequences[$s].argmax[$i]]
    | "\(map(select(.)) | length) \(length)"')
  read -r identical prompts prefix < <(jq -n -r --slurpfile a "$work/original.gen.jsonl" --slurpfile b "$work/$type.gen.jsonl" '
    [range(0; $a | length) as $p | $a[$p].generated_ids as $x | $b[$p].generated_ids as $y
     | ([$x | length, ($y | length)] | min) as $n
     | {same: ($x == $y), prefix: (([range(0; $n) | select($x[.] != $y[.])] | first) // $n)}]
    | "\(map(select(.same)) | length) \(length) \(map(.prefix) | add / length)"')
  printf '%-8s %10.4f %13s (%5.1f%%) %11s, prefix %4.1f\n' "$type" "$(jq .ppl "$work/$type.ppl.json")" \
    "$same/$total" "$(awk "BEGIN { print 100 * $same / $total }")" "$identical/$prompts" "$prefix"
  fallbacks=$(grep -c fallback "$work/$type.log" || true)
  if [ "$fallbacks" -gt 0 ]; then
    echo "         ($fallbacks tensors fell back to another type; see pagoda-quantize's output)"
  fi
done
