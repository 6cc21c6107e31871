#pragma once
// Random-weight models written as GGUF, for tests and benchmarks: deterministic from a seed,
// of any supported architecture, with a SentencePiece-style vocabulary made up inside or a real
// one copied from another GGUF, so the tokenizer works on them too.

#include <cstdint>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"

namespace pagoda {

struct SynthSpec {
  // The shape and hyperparameters; arch picks the layout (qwen2: Q/K/V biases; qwen3: Q/K
  // norms, and key_length when set) and the metadata prefix. rope_freq_scale != 1 is written as
  // linear RoPE scaling (factor 1/rope_freq_scale).
  ModelConfig config;
  uint64_t seed = 1;
  GgmlType type = GgmlType::F32;  // storage type of the matrices (norms and biases stay F32)
  bool tied_output = false;       // no output.weight: the classifier reuses token_embd
  bool rope_freqs = false;        // write Llama 3.1-style rope_freqs.weight factors
  // A GGUF (vocab-only is enough) whose tokenizer.* keys are copied; the vocabulary size is
  // then its token count. Empty: a synthetic SentencePiece vocabulary of config.vocab_size.
  std::string vocab_path;
};

// The named shapes: "s15m" (dim 288, 6 layers, 6 heads, FFN 768, vocab 32000) and "s110m"
// (dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000), llama2.c's TinyStories sizes.
// Throws pagoda::Error for an unknown name.
ModelConfig synth_preset(const std::string& name);

// Writes the model to `path` and returns its config (vocab_size is the copied vocabulary's).
// Throws pagoda::Error on a bad shape, an unreadable vocabulary file or an I/O failure.
ModelConfig write_synth_model(const std::string& path, const SynthSpec& spec);

}  // namespace pagoda
