#!/usr/bin/env bash
# Offline, never in CI: llama.cpp's llama-embedding on random-weight nomic-bert and
# jina-bert-v2 models that pagoda-synth writes from a fixed seed (F32 and Q8_0; mean, cls, last
# and none pooling, and for jina-bert-v2 the score of jina-reranker's one-row rank head on a
# --pooling rank file of the same seed; a few prompts), recorded as tests/data/encoders_llamacpp.json, which
# test_encoder_architectures checks the reference encoder and the Engine against (it writes the
# same files again from the seed). bert's are scripts/bert_vs_llamacpp.sh's.
#   scripts/encoders_vs_llamacpp.sh [LLAMA_CPP_DIR (/tmp/llama.cpp)] [BUILD_DIR (build/release)]
# llama-embedding must be built there: cmake --build build --target llama-embedding.
source "$(dirname "$0")/llamacpp_embedding_env.sh" "$@"

# Each architecture's shape and seed (the test reads them from the JSON). jina-bert-v2 has 6
# heads, not a power of two, so ALiBi's interleaved slopes are covered; its optional norms are
# written.
declare -A shapes=(
  [nomic-bert]="--dim 128 --layers 3 --heads 4 --ffn 256 --vocab 1000 --context 128 --seed 11"
  [jina-bert-v2]="--dim 96 --layers 3 --heads 6 --ffn 256 --vocab 1000 --context 128 --seed 12"
)
prompts=("hello world" "the quick brown fox jumps over the lazy dog." "a, b; c: d!" "x"
  "it was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness")

for arch in nomic-bert jina-bert-v2; do
  for type in f32 q8_0; do
    # shellcheck disable=SC2086  # the shape is a list of flags
    "$synth" --arch "$arch" --pooling mean ${shapes[$arch]} --type "$type" -o "$work/$arch-$type.gguf" 2>/dev/null
    poolings=(mean cls last none)
    if [[ $arch == jina-bert-v2 ]]; then
      # shellcheck disable=SC2086
      "$synth" --arch "$arch" --pooling rank ${shapes[$arch]} --type "$type" -o "$work/$arch-rank-$type.gguf" 2>/dev/null
      poolings+=(rank)
    fi
    for pooling in "${poolings[@]}"; do
      file="$work/$arch-$type.gguf" normalize=2
      # A score is not normalized (this snapshot would normalize dim floats of a 1-float vector).
      [[ $pooling == rank ]] && file="$work/$arch-rank-$type.gguf" normalize=-1
      for i in "${!prompts[@]}"; do
        # Token ids (--verbose-prompt, "  id -> 'piece'") then the JSON, both on stdout.
        "$embedding" -m "$file" -p "${prompts[$i]}" -c 128 --pooling "$pooling" -t 2 \
          --verbose-prompt --embd-normalize "$normalize" --embd-output-format json 2>/dev/null \
          >"$work/$arch-$type-$pooling-$i.out"
      done
    done
  done
done

python3 - "$work" "$llama_dir" "${prompts[@]}" <<'PY' >tests/data/encoders_llamacpp.json
import json, re, subprocess, sys
work, llama_dir, prompts = sys.argv[1], sys.argv[2], sys.argv[3:]
commit = subprocess.run(["git", "-C", llama_dir, "log", "-1", "--format=%h %cs"], capture_output=True, text=True).stdout.strip()
models = {
    "nomic-bert": {"dim": 128, "layers": 3, "heads": 4, "ffn": 256, "vocab": 1000, "context": 128, "seed": 11,
                   "rope_theta": 1000},
    "jina-bert-v2": {"dim": 96, "layers": 3, "heads": 6, "ffn": 256, "vocab": 1000, "context": 128, "seed": 12},
}
cases = []
for arch in models:
    for t in ["f32", "q8_0"]:
        for pooling in ["mean", "cls", "last", "none"] + (["rank"] if arch == "jina-bert-v2" else []):
            for i, prompt in enumerate(prompts):
                out = open(f"{work}/{arch}-{t}-{pooling}-{i}.out").read()
                start = out.index("{")
                tokens = [int(m) for m in re.findall(r"^\s*(\d+) -> '", out[:start], re.M)]
                if pooling == "rank":  # the score; the rest of the array is whatever followed it in memory
                    embedding = [float(re.search(r'"embedding": \[([-0-9.e]+)', out).group(1))]
                else:  # with none, every token's row, end to end
                    embedding = [x for d in json.loads(out[start:])["data"] for x in d["embedding"]]
                cases.append({"arch": arch, "type": t, "pooling": pooling, "prompt": prompt, "tokens": tokens,
                              "embedding": embedding})
doc = {"llama_cpp": f"llama-embedding {commit}, --embd-normalize 2 (-1 for rank)", "models": models, "cases": cases}
print(json.dumps(doc, separators=(",", ":")))
PY
echo "wrote tests/data/encoders_llamacpp.json"
