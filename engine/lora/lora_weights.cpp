#include "engine/lora/lora_weights.h"

namespace pagoda {

namespace {

kernels::LoraElement element_for(GgmlType stored) {
  switch (stored) {
    case GgmlType::F16: return kernels::LoraElement::F16;
    case GgmlType::BF16: return kernels::LoraElement::BF16;
    default: return kernels::LoraElement::F32;
  }
}

}  // namespace

// Packed serially on the calling (router) thread, so a swap never takes cores from the step.
LoraWeights::LoraWeights(std::string name, const LoraAdapter& adapter) : name_(std::move(name)) { pack(adapter); }

void LoraWeights::pack(const LoraAdapter& adapter) {
  layers_.resize(adapter.layers.size());
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      const auto& t = adapter.layers[l][size_t(p)];
      if (!t) continue;
      layers_[l][size_t(p)] = kernels::LoraFactors::pack(t->a.data(), t->b.data(), t->rank, t->n_in, t->n_out, t->scale,
                                                         element_for(t->stored));
      max_rank_ = std::max(max_rank_, t->rank);
    }
  }
}

}  // namespace pagoda
