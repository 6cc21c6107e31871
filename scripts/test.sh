#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: every test in the Release build, every test
# again under AddressSanitizer + UBSan, and the concurrency tests (engine, embeddings, actors, page pool,
# encoder engine, prefix cache, KV groups, the disk tier, images, model-file faults, the SIGBUS guard, the server's worker pool) under
# ThreadSanitizer (the tsan test preset selects them), then every libFuzzer harness for a
# bounded time (scripts/fuzz.sh; PAGODA_FUZZ_SECONDS each, 30 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

(cd tests/server && npm ci --no-audit --no-fund)  # the openai client the server tests drive
python3 scripts/check_layers.py  # includes against cmake/layers.txt (every build runs it too)
bash scripts/check_format.sh     # every C++ file as .clang-format writes it
cmake --preset release -DPAGODA_WERROR=ON
cmake --build --preset release -j "$jobs"
ctest --preset release

cmake --preset asan -DPAGODA_WERROR=ON
cmake --build --preset asan -j "$jobs"
ctest --preset asan

cmake --preset tsan -DPAGODA_WERROR=ON
cmake --build --preset tsan -j "$jobs" --target test_engine test_engine_lora test_engine_embed test_encoder_engine test_page_pool test_actors test_prefix_pool test_prefix_churn test_kv_groups test_faults_mapping test_worker_pool test_disk_tier test_engine_images test_engine_image_prefix pagoda-generate
ctest --preset tsan

bash scripts/fuzz.sh "${PAGODA_FUZZ_SECONDS:-30}"
