#!/usr/bin/env bash
# Offline, never in CI: llama.cpp's llama-embedding on random-weight bert models that
# pagoda-synth writes from a fixed seed (F32 and Q8_0; mean, cls, last and none pooling, and the rank
# head's score on a --pooling rank file of the same seed; a few prompts),
# recorded as tests/data/bert_llamacpp.json, which test_bert_model checks the reference encoder
# against (it writes the same files again from the seed).
#   scripts/bert_vs_llamacpp.sh [LLAMA_CPP_DIR (/tmp/llama.cpp)] [BUILD_DIR (build/release)]
# llama-embedding must be built there: cmake --build build --target llama-embedding.
source "$(dirname "$0")/llamacpp_embedding_env.sh" "$@"

# The model's shape and seed: the test reads them from the JSON.
shape=(--dim 128 --layers 3 --heads 4 --ffn 256 --vocab 1000 --context 128 --seed 11)
prompts=("hello world" "the quick brown fox jumps over the lazy dog." "a, b; c: d!" "x")

for type in f32 q8_0; do
  "$synth" --arch bert --pooling mean "${shape[@]}" --type "$type" -o "$work/bert-$type.gguf"
  "$synth" --arch bert --pooling rank "${shape[@]}" --type "$type" -o "$work/bert-rank-$type.gguf"
  for pooling in mean cls last rank none; do
    file="$work/bert-$type.gguf" normalize=2
    # A score is not normalized (this snapshot would normalize dim floats of a 1-float vector).
    [[ $pooling == rank ]] && file="$work/bert-rank-$type.gguf" normalize=-1
    for i in "${!prompts[@]}"; do
      # Token ids (--verbose-prompt, "  id -> 'piece'") then the JSON, both on stdout.
      "$embedding" -m "$file" -p "${prompts[$i]}" -c 128 --pooling "$pooling" -t 2 --verbose-prompt \
        --embd-normalize "$normalize" --embd-output-format json 2>/dev/null >"$work/$type-$pooling-$i.out"
    done
  done
done

python3 - "$work" "$llama_dir" "${prompts[@]}" <<'PY' >tests/data/bert_llamacpp.json
import json, re, subprocess, sys
work, llama_dir, prompts = sys.argv[1], sys.argv[2], sys.argv[3:]
commit = subprocess.run(["git", "-C", llama_dir, "log", "-1", "--format=%h %cs"], capture_output=True, text=True).stdout.strip()
cases = []
for t in ["f32", "q8_0"]:
    for pooling in ["mean", "cls", "last", "rank", "none"]:
        for i, prompt in enumerate(prompts):
            out = open(f"{work}/{t}-{pooling}-{i}.out").read()
            start = out.index("{")
            tokens = [int(m) for m in re.findall(r"^\s*(\d+) -> '", out[:start], re.M)]
            if pooling == "rank":  # the score; the rest of the array is whatever followed it in memory
                embedding = [float(re.search(r'"embedding": \[([-0-9.e]+)', out).group(1))]
            else:  # with none, every token's row, end to end
                embedding = [x for d in json.loads(out[start:])["data"] for x in d["embedding"]]
            cases.append({"type": t, "pooling": pooling, "prompt": prompt, "tokens": tokens, "embedding": embedding})
model = {"dim": 128, "layers": 3, "heads": 4, "ffn": 256, "vocab": 1000, "context": 128, "seed": 11}
doc = {"llama_cpp": f"llama-embedding {commit}, --embd-normalize 2 (-1 for rank)", "model": model, "cases": cases}
print(json.dumps(doc, separators=(",", ":")))
PY
echo "wrote tests/data/bert_llamacpp.json"
