#pragma once
// Small random-weight encoder models (bert, nomic-bert, jina-bert-v2) for the encoder tests,
// written by pagoda-synth's code into the scratch directory, and what those tests compare
// vectors with.

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/forward/encoder_runner.h"
#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"
#include "pagoda/engine.h"
#include "testing/reference_encoder.h"

namespace pagoda::test {

// dim 64, 2 layers, 4 heads, ffn 128, 600 tokens, context 64, with `pooling_type` (llama.cpp's
// numbers: 1 mean, 2 cls, 3 last, 4 rank: the rank head is written too).
ModelConfig small_bert(int32_t pooling_type);

// Writes `config` with seed `seed`, F32 or quantized as q8_0, as scratch file `name`; its path.
std::string write_bert(const std::string& name, const ModelConfig& config, GgmlType type = GgmlType::F32,
                       uint64_t seed = 3);

// A small model of another encoder architecture with `pooling_type`: nomic-bert as
// small_bert's shape with RoPE base 1000; jina-bert-v2 with dim 96 and 6 heads (not a power of
// two, so ALiBi's interleaved slopes are used).
ModelConfig small_encoder(Architecture arch, int32_t pooling_type);

// write_bert for any encoder; `jina_norms`: jina-bert-v2's optional LayerNorms are written.
std::string write_encoder(const std::string& name, const ModelConfig& config, GgmlType type = GgmlType::F32,
                          uint64_t seed = 3, bool jina_norms = true);

// `n` ids drawn uniformly from [0, vocab).
std::vector<int32_t> random_ids(std::mt19937& rng, int32_t n, int32_t vocab);

// The cosine of two vectors of equal length, and their largest elementwise difference (in double).
double cosine(std::span<const float> a, std::span<const float> b);
double max_abs_diff(std::span<const float> a, std::span<const float> b);

// `runner`'s final hidden states of `ids`, computed as the only sequence of its call.
std::vector<float> run_alone(EncoderRunner& runner, const std::vector<int32_t>& ids);

// Expects the runner's final hidden states of random inputs of 1, 5, 17 and 64 tokens to be the
// reference encoder's row for row: each F32 row within `f32_bound` (largest difference), each
// quantized row with a cosine above `quantized_cosine` (Q8_0 quantizes the activations too, as
// ggml does; the reference only the weights). `what` names the model in failures.
void expect_rows_match_reference(const Model& model, const std::string& what, double f32_bound,
                                 double quantized_cosine);

// Expects the runner's rank scores of random inputs of 2, 9 and 40 tokens (each alone) to be the
// reference encoder's within `bound`; returns them.
std::vector<float> expect_rank_scores_match_reference(const Model& model, double bound);

// Pooling none against llama-embedding's recorded rows (`want`: one normalized row per token of
// `ids`): the reference's rows and the engine's Pooling::None rows, each normalized alone, within
// llama.cpp's bounds (cosine 0.9999 and largest difference 2e-4 for F32; 0.999 and 1e-2 else).
void expect_token_rows_match(const ReferenceEncoder& reference, Engine& engine, const std::vector<int32_t>& ids,
                             const std::vector<float>& want, bool f32);

// Expects each of a few inputs (1 to 64 tokens) to get the same hidden-state bits alone on one
// thread as batched with the others, in order and reversed, on two threads (`what` names the
// model in failures).
void expect_batch_invariant(const Model& model, const std::string& what);

}  // namespace pagoda::test
