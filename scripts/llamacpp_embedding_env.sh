# Sourced by the offline recording scripts (bert_vs_llamacpp.sh, encoders_vs_llamacpp.sh) with
# their arguments: from the repository's root, llama.cpp's llama-embedding and pagoda-synth, and
# a scratch folder removed on exit.
#   $1 LLAMA_CPP_DIR (/tmp/llama.cpp), where llama-embedding is built
#   $2 BUILD_DIR (build/release), where pagoda-synth is built
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
llama_dir=${1:-/tmp/llama.cpp}
build=${2:-build/release}
embedding="$llama_dir/build/bin/llama-embedding"
synth="$build/examples/pagoda-synth"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
