#pragma once
// LoRA helpers for tests: random in-memory adapters and the oracle's merged weights.

#include <cstdint>

#include "engine/lora/lora_adapter.h"
#include "engine/model/model.h"

namespace pagoda::test {

// An adapter with random A and B for most targets (a few left out), rank `rank`.
LoraAdapter random_adapter(const ModelConfig& c, int32_t rank, float scale, uint32_t seed);

// The base model with every target of `adapter` merged in: W + scale·B·A.
Model merged(const Model& base, const LoraAdapter& adapter);

}  // namespace pagoda::test
