#!/usr/bin/env bash
# Installs, builds, and runs the main job: greedy generation on a random-weight s15m model that
# pagoda-synth writes on first use (its text is meaningless: the weights are random).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
model=build/models/s15m.gguf
if [ ! -f "$model" ]; then
  mkdir -p build/models
  ./build/release/examples/pagoda-synth --preset s15m -o "$model"
fi
./build/release/examples/pagoda-generate -m "$model" --prompt "${1:-Once upon a time}" -n 32 --temp 0
