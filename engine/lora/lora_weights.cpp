#include "engine/lora/lora_weights.h"

#include <tbb/task_arena.h>

namespace pagoda {

LoraWeights::LoraWeights(std::string name, const LoraAdapter& adapter) : name_(std::move(name)) {
  // Packed on the calling (router) thread alone, so a swap never takes cores from the step.
  tbb::task_arena one_thread(1);
  one_thread.execute([&] { pack(adapter); });
}

void LoraWeights::pack(const LoraAdapter& adapter) {
  layers_.resize(adapter.layers.size());
  for (size_t l = 0; l < adapter.layers.size(); ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      const auto& t = adapter.layers[l][size_t(p)];
      if (!t) continue;
      std::vector<float> scaled_b(t->b);
      for (float& v : scaled_b) v *= t->scale;
      layers_[l][size_t(p)] = Target{t->rank, kernels::PackedMatrix::pack(t->a.data(), t->rank, t->n_in),
                                     kernels::PackedMatrix::pack(scaled_b.data(), t->n_out, t->rank)};
      max_rank_ = std::max(max_rank_, t->rank);
    }
  }
}

}  // namespace pagoda
