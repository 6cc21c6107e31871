#pragma once
// A LoRA adapter prepared for the kernels ("resident"): every target's A and B laid out for the
// fused multi-adapter kernel (kernels/lora_sgmv) in the file's own precision when that is f16
// or bf16 (f32 otherwise), all in one block of memory, so a step applies y += (scale·x·Aᵀ)·Bᵀ
// per row without touching the base weights. Immutable once built; shared by every sequence
// that uses it.

#include <array>
#include <string>
#include <vector>

#include "engine/lora/lora_adapter.h"
#include "kernels/lora_factors.h"

namespace pagoda {

class LoraWeights {
 public:
  LoraWeights(std::string name, const LoraAdapter& adapter);

  const std::string& name() const { return name_; }
  // The target of projection `p` in block `layer`, or nullptr when the adapter leaves it alone.
  const kernels::LoraFactors* target(int32_t layer, LoraProjection p) const { return layers_[layer][size_t(p)]; }
  int32_t max_rank() const { return max_rank_; }

 private:
  std::string name_;
  int32_t max_rank_ = 0;
  // Every target's factors in block order, projection order within a block: the order a step
  // reads them in.
  kernels::LoraFactorSet factors_;
  std::vector<std::array<const kernels::LoraFactors*, kLoraProjections>> layers_;
};

}  // namespace pagoda
