// VisionEncoder's projectors: the encoder's last rows (x_) into each image's token rows of
// projection_dim floats in `out`, image after image.

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "engine/forward/encoder_rows.h"
#include "engine/forward/vision_encoder.h"
#include "kernels/ops.h"

namespace pagoda {

void VisionEncoder::project(std::vector<float>& out) {
  out.resize(size_t(tokens_) * size_t(model_.config.projection_dim));
  switch (model_.config.projector) {
    case ProjectorType::LlavaMlp: project_llava(out); break;
    case ProjectorType::Gemma3: project_gemma3(out); break;
    case ProjectorType::Qwen2VL:
    case ProjectorType::Qwen25VL: project_qwen(out); break;
  }
}

// LLaVA: the patch rows (the class row dropped), mm.0 + b, GELU, mm.2 + b.
void VisionEncoder::project_llava(std::vector<float>& out) {
  const VisionConfig& c = model_.config;
  const VisionWeights& w = model_.weights;
  const int32_t dim = c.dim, hidden = mm_0_.rows();
  tbb::parallel_for(size_t(0), images_.size(), [&](size_t i) {
    const ImageRows& image = images_[i];
    std::copy_n(x_.data() + size_t(image.first_row + 1) * dim, size_t(image.tokens) * dim,
                norm_.data() + size_t(image.first_token) * dim);
  });
  projected_.resize(size_t(tokens_) * size_t(hidden));
  kernels::matmul(norm_.data(), tokens_, dim, mm_0_, projected_.data(), hidden);
  add_bias_rows(projected_.data(), tokens_, hidden, w.mm_0_bias);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, tokens_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t t = range.begin(); t < range.end(); ++t) {
      float* row = projected_.data() + size_t(t) * hidden;
      kernels::gelu(row, row, hidden);
    }
  });
  kernels::matmul(projected_.data(), tokens_, hidden, mm_2_, out.data(), c.projection_dim);
  add_bias_rows(out.data(), tokens_, c.projection_dim, w.mm_2_bias);
}

// Gemma 3: the patch grid average-pooled in k×k squares (k = grid side / √tokens_per_image; each
// square summed row by row, then divided by k², as ggml_pool_2d and AvgPool2d), the pooled
// grid row-major, RMSNorm × mm.soft_emb_norm, then the input projection.
void VisionEncoder::project_gemma3(std::vector<float>& out) {
  const VisionConfig& c = model_.config;
  const int32_t dim = c.dim, side = c.patches_per_side();
  const auto out_side = int32_t(std::lround(std::sqrt(double(c.tokens_per_image))));
  const int32_t k = side / out_side;
  const float inv_area = 1.0f / float(k * k);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, tokens_, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t t = range.begin(); t < range.end(); ++t) {
      const ImageRows& image = images_[size_t(t / c.tokens_per_image)];
      const int32_t cell = t - image.first_token, oy = cell / out_side, ox = cell % out_side;
      float* pooled = norm_.data() + size_t(t) * dim;
      std::fill_n(pooled, dim, 0.0f);
      for (int32_t ky = 0; ky < k; ++ky) {
        for (int32_t kx = 0; kx < k; ++kx) {
          const float* x = x_.data() + size_t(image.first_row + (oy * k + ky) * side + ox * k + kx) * dim;
          for (int32_t j = 0; j < dim; ++j) pooled[j] += x[j];
        }
      }
      for (int32_t j = 0; j < dim; ++j) pooled[j] *= inv_area;
    }
  });
  kernels::rmsnorm_rows(norm_.data(), dim, model_.weights.mm_soft_emb_norm.data(), norm_.data(), dim, tokens_, dim,
                        c.eps);
  kernels::matmul(norm_.data(), tokens_, dim, mm_0_, out.data(), c.projection_dim);
}

// Qwen2-VL's merger: (ln_q, already applied as post_ln) each merged unit's m² rows side by side,
// mm.0 + b, GELU, mm.2 + b; the units computed in the encoder's row order (windows), each
// written to its token row (the merged grid row-major).
void VisionEncoder::project_qwen(std::vector<float>& out) {
  const VisionConfig& c = model_.config;
  const VisionWeights& w = model_.weights;
  const int32_t width = merge_ * merge_ * c.dim, units = rows_ / (merge_ * merge_), proj = c.projection_dim;
  const int32_t hidden = mm_0_.rows();
  projected_.resize(size_t(units) * size_t(hidden + proj));
  float* merged = projected_.data();
  float* by_unit = projected_.data() + size_t(units) * hidden;
  kernels::matmul(x_.data(), units, width, mm_0_, merged, hidden);
  add_bias_rows(merged, units, hidden, w.mm_0_bias);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, units, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t u = range.begin(); u < range.end(); ++u)
      kernels::gelu(merged + size_t(u) * hidden, merged + size_t(u) * hidden, hidden);
  });
  kernels::matmul(merged, units, hidden, mm_2_, by_unit, proj);
  add_bias_rows(by_unit, units, proj, w.mm_2_bias);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, units, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t u = range.begin(); u < range.end(); ++u)
      std::copy_n(by_unit + size_t(u) * proj, proj, out.data() + size_t(unit_token_[size_t(u)]) * proj);
  });
}

}  // namespace pagoda
