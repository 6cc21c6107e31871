#include "engine/forward/encoder_rows.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>

namespace pagoda {

void layer_norm_rows(const float* in, float* out, int32_t rows, int32_t dim, const std::vector<float>& weight,
                     const std::vector<float>& bias, float eps, int32_t stride) {
  const size_t step = size_t(stride > 0 ? stride : dim);
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      const float* x = in + size_t(r) * step;
      float* y = out + size_t(r) * step;
      const float mean = lane_sum(x, dim, [](float v) { return v; }) / float(dim);
      for (int32_t j = 0; j < dim; ++j) y[j] = x[j] - mean;
      const float variance = lane_sum(y, dim, [](float v) { return v * v; }) / float(dim);
      const float scale = 1.0f / std::sqrt(variance + eps);
      if (bias.empty()) {
        for (int32_t j = 0; j < dim; ++j) y[j] = y[j] * scale * weight[size_t(j)];
      } else {
        for (int32_t j = 0; j < dim; ++j) y[j] = y[j] * scale * weight[size_t(j)] + bias[size_t(j)];
      }
    }
  });
}

void add_bias_rows(float* x, int32_t rows, int32_t width, const std::vector<float>& bias, const float* residual) {
  tbb::parallel_for(tbb::blocked_range<int32_t>(0, rows, kRowGrain), [&](const tbb::blocked_range<int32_t>& range) {
    for (int32_t r = range.begin(); r < range.end(); ++r) {
      float* row = x + size_t(r) * width;
      if (!bias.empty())
        for (int32_t j = 0; j < width; ++j) row[j] += bias[size_t(j)];
      if (residual) {
        const float* add = residual + size_t(r) * width;
        for (int32_t j = 0; j < width; ++j) row[j] += add[j];
      }
    }
  });
}

}  // namespace pagoda
