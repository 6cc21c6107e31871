#!/usr/bin/env bash
# Installs, builds, and runs the main job: pagoda-chat on its default model, a random-weight
# s15m that pagoda writes on first use (its text means nothing: the weights are random).
# Extra arguments go to pagoda-chat, e.g. `bash scripts/run.sh -m stories260K.gguf`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
exec ./build/release/examples/pagoda-chat "$@"
