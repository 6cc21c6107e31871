#include "support/lora_support.h"

#include <cmath>
#include <memory>
#include <random>

namespace pagoda::test {

namespace {

// [n_out][n_in] of each projection, in LoraProjection order.
std::pair<int32_t, int32_t> projection_shape(const ModelConfig& c, int32_t p) {
  const int32_t q = c.n_heads * c.head_dim();
  switch (LoraProjection(p)) {
    case LoraProjection::Q: return {q, c.dim};
    case LoraProjection::K:
    case LoraProjection::V: return {c.kv_dim(), c.dim};
    case LoraProjection::Output: return {c.dim, q};
    case LoraProjection::Gate:
    case LoraProjection::Up: return {c.ffn_dim, c.dim};
    case LoraProjection::Down: return {c.dim, c.ffn_dim};
  }
  return {0, 0};
}

WeightTensor LayerWeights::*projection_member(int32_t p) {
  static WeightTensor LayerWeights::*const members[] = {
      &LayerWeights::attn_q,   &LayerWeights::attn_k, &LayerWeights::attn_v,  &LayerWeights::attn_output,
      &LayerWeights::ffn_gate, &LayerWeights::ffn_up, &LayerWeights::ffn_down};
  return members[p];
}

}  // namespace

LoraAdapter random_adapter(const ModelConfig& c, int32_t rank, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  LoraAdapter a;
  a.layers.resize(c.n_layers);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      if ((l + p + int32_t(seed)) % 5 == 0) continue;  // leave some targets out
      const auto [n_out, n_in] = projection_shape(c, p);
      LoraTarget t{
          rank, n_in, n_out, scale, std::vector<float>(size_t(rank) * n_in), std::vector<float>(size_t(n_out) * rank)};
      for (float& v : t.a) v = u(rng) / std::sqrt(float(n_in));
      for (float& v : t.b) v = u(rng) / std::sqrt(float(rank));
      a.layers[l][size_t(p)] = std::move(t);
    }
  }
  return a;
}

// The base model with every target merged in: W + scale·B·A, each merged matrix an f32 buffer
// that the returned Model owns beside the base's mapping.
Model merged(const Model& base, const LoraAdapter& adapter) {
  struct Storage {
    std::shared_ptr<const void> base;
    std::vector<std::vector<float>> merged;
  };
  auto storage = std::make_shared<Storage>();
  storage->base = base.storage;
  Model m = base;
  for (int32_t l = 0; l < base.config.n_layers; ++l) {
    for (int32_t p = 0; p < kLoraProjections; ++p) {
      const auto& t = adapter.layers[l][size_t(p)];
      if (!t) continue;
      WeightTensor& view = m.weights.layers[l].*projection_member(p);
      std::vector<float>& w = storage->merged.emplace_back(view.to_f32());
      view = WeightTensor{GgmlType::F32, reinterpret_cast<const std::byte*>(w.data()), view.rows, view.cols};
      for (int32_t o = 0; o < t->n_out; ++o) {
        for (int32_t i = 0; i < t->n_in; ++i) {
          double delta = 0.0;
          for (int32_t r = 0; r < t->rank; ++r)
            delta += double(t->b[size_t(o) * t->rank + r]) * t->a[size_t(r) * t->n_in + i];
          w[size_t(o) * t->n_in + i] += float(t->scale * delta);
        }
      }
    }
  }
  m.storage = std::move(storage);
  return m;
}

}  // namespace pagoda::test
