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
LoraWeights::LoraWeights(std::string name, const LoraAdapter& adapter) : name_(std::move(name)) {
  std::vector<kernels::LoraFactorSource> sources;
  for (const auto& layer : adapter.layers)
    for (const auto& t : layer)
      if (t) {
        sources.push_back({t->a.data(), t->b.data(), t->rank, t->n_in, t->n_out, t->scale, element_for(t->stored)});
        max_rank_ = std::max(max_rank_, t->rank);
      }
  factors_ = kernels::LoraFactorSet(sources);
  layers_.resize(adapter.layers.size());
  size_t next = 0;
  for (size_t l = 0; l < adapter.layers.size(); ++l)
    for (size_t p = 0; p < size_t(kLoraProjections); ++p)
      layers_[l][p] = adapter.layers[l][p] ? &factors_[next++] : nullptr;
}

}  // namespace pagoda
