#pragma once
// Random-weight models written as GGUF, for tests and benchmarks: deterministic from a seed,
// of any supported architecture, with a SentencePiece-style vocabulary (WordPiece for the
// encoders) made up inside or a real one copied from another GGUF, so the tokenizer works on
// them too. Written tensor by tensor straight to the file, so memory holds one tensor at a time
// (an 8B model on a 24 GB machine).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/quant_preset.h"
#include "engine/model/model_config.h"

namespace pagoda {

struct SynthSpec {
  // The shape and hyperparameters; arch picks the layout (qwen2: Q/K/V biases; qwen3: Q/K
  // norms, and key_length when set; gemma2/gemma3: post-norms, tied embeddings; phi3: fused
  // attn_qkv and gate|up ffn_up; n_experts > 0: router and 3-D expert tensors, qwen2moe's
  // shared expert; bert, nomic-bert, jina-bert-v2: llama.cpp's encoder layouts, bert's and
  // jina's with the rank head cls.* when pooling_type is 4, rank, and n_token_types 2 when 0;
  // qwen3 with rank pooling: Qwen3-Reranker's cls.output, labels and rerank prompt, which need a
  // vocab_path holding "yes" and "no") and the metadata prefix. rope_freq_scale != 1 is written
  // as linear RoPE scaling (factor 1/rope_freq_scale); rope_dim, the window, the soft-caps and
  // the expert counts as their keys.
  ModelConfig config;
  uint64_t seed = 1;
  GgmlType type = GgmlType::F32;  // storage type of the matrices (norms and biases stay F32)
  // Quantized as pagoda-quantize would quantize the F32 model (each tensor's type chosen by the
  // preset, llama.cpp's tensor order, general.file_type): the same bytes. Overrides `type`.
  std::optional<QuantPreset> quant;
  bool tied_output = false;  // no output.weight: the classifier reuses token_embd
  bool rope_freqs = false;   // write Llama 3.1-style rope_freqs.weight factors
  // Write Phi-3 LongRoPE: rope_factors_long/short.weight, config.rope_attn_factor and
  // config.rope_original_context (which picks the set: long when the context exceeds it).
  bool longrope = false;
  // Scales every attn_output.weight. 0 leaves attention out of the residual stream, so the next
  // token depends on the current one alone and the model repeats a text it has produced, word
  // for word; every matrix is still read and multiplied. An instrument for measuring speculative
  // decoding at high acceptance on a model of real size (bench/bench_speculative).
  float attn_output_scale = 1.0f;
  // jina-bert-v2: write the optional LayerNorms llama.cpp reads (attn_q_norm, attn_k_norm,
  // attn_norm_2 in every block).
  bool jina_norms = true;
  // A GGUF (vocab-only is enough) whose tokenizer.* keys are copied; the vocabulary size is
  // then its token count. Empty: a synthetic SentencePiece vocabulary of config.vocab_size.
  std::string vocab_path;
  // Control tokens the synthetic SentencePiece vocabulary holds after <unk>, <s> and </s>: a
  // family's special tokens that the engine looks up by their text (Gemma 3's <start_of_image>,
  // <end_of_image>, <image_soft_token>). Refused with vocab_path and for an encoder's WordPiece.
  std::vector<std::string> control_tokens;
};

// A named shape: llama2.c's TinyStories sizes ("s15m", "s110m", synthetic vocabulary of 32000)
// and the shapes of the models people run, with the vocabulary file of their family.
struct SynthPreset {
  std::string name;
  ModelConfig config;
  std::string vocab_file;  // a file of ../shared/vocab to copy the vocabulary from; empty: synthetic
  bool tied_output = false;
  bool rope_freqs = false;  // Llama 3.1-style frequency factors
};

// Every preset, smallest first.
const std::vector<SynthPreset>& synth_presets();
// Throws pagoda::Error, listing the known names, for an unknown name.
const SynthPreset& find_synth_preset(const std::string& name);
// The preset's shape (find_synth_preset(name).config).
ModelConfig synth_preset(const std::string& name);

// Writes the model to `path` and returns its config (vocab_size is the copied vocabulary's).
// Throws pagoda::Error on a bad shape, an unreadable vocabulary file or an I/O failure.
ModelConfig write_synth_model(const std::string& path, const SynthSpec& spec);

}  // namespace pagoda
