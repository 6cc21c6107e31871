#pragma once
// Random LoRA adapters written as GGUF in llama.cpp's adapter format, for tests and benchmarks:
// deterministic from a seed, shaped for a given base model.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "engine/lora/lora_adapter.h"
#include "engine/model/model_config.h"

namespace pagoda {

struct LoraSynthSpec {
  int32_t rank = 8;
  float alpha = 8.0f;  // written as adapter.lora.alpha; scale = alpha / rank (0: scale 1)
  uint64_t seed = 1;
  std::vector<LoraProjection> projections = {LoraProjection::Q,      LoraProjection::K,    LoraProjection::V,
                                             LoraProjection::Output, LoraProjection::Gate, LoraProjection::Up,
                                             LoraProjection::Down};
  std::vector<int32_t> layers{};  // the blocks to adapt; empty means every block
  GgmlType type = GgmlType::F32;  // storage type of lora_a and lora_b
};

// Writes the adapter to `path`. A target's values depend only on the seed, its block and its
// projection, so an adapter over a subset of targets agrees with the full one on them.
// Throws pagoda::Error on a bad base shape, a rank below 1, no targets, a block the base model
// lacks, a non-finite alpha, a storage type the shapes do not allow (Q8_0 needs rows of whole
// 32-element blocks: n_in and rank multiples of 32) or an I/O failure.
void write_synth_lora(const std::string& path, const ModelConfig& base, const LoraSynthSpec& spec);

}  // namespace pagoda
