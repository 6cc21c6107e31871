#pragma once
// Random-weight Llama models written as GGUF, for tests and benchmarks: deterministic from a
// seed, with a SentencePiece-style vocabulary inside so the tokenizer works on them too.

#include <cstdint>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"

namespace pagoda {

struct SynthSpec {
  ModelConfig config;
  uint64_t seed = 1;
  GgmlType type = GgmlType::F32;  // storage type of the matrices (norms stay F32)
  bool tied_output = false;       // no output.weight: the classifier reuses token_embd
};

// The named shapes: "s15m" (dim 288, 6 layers, 6 heads, FFN 768, vocab 32000) and "s110m"
// (dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000), llama2.c's TinyStories sizes.
// Throws pagoda::Error for an unknown name.
ModelConfig synth_preset(const std::string& name);

// Writes the model to `path`. Throws pagoda::Error on a bad shape or an I/O failure.
void write_synth_model(const std::string& path, const SynthSpec& spec);

}  // namespace pagoda
