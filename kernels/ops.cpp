#include "kernels/ops.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/dispatch.h"

namespace pagoda::kernels {

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  detail::active_table().ops->rmsnorm(x, weight, out, n, eps);
}

void rmsnorm_rows(const float* x, int ldx, const float* weight, float* out, int ldo, int rows, int n, float eps) {
  const auto fn = detail::active_table().ops->rmsnorm;
  // Rows in blocks: one row is too little work for a task of its own.
  tbb::parallel_for(tbb::blocked_range<int>(0, rows, 16), [&](const tbb::blocked_range<int>& r) {
    for (int i = r.begin(); i < r.end(); ++i) fn(x + std::size_t(i) * ldx, weight, out + std::size_t(i) * ldo, n, eps);
  });
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  detail::active_table().ops->swiglu(gate, up, out, n);
}

void geglu(const float* gate, const float* up, float* out, int n) {
  constexpr float kSqrt2OverPi = 0.7978845608f;
  for (int i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void gelu(const float* x, float* out, int n) { detail::active_table().ops->gelu(x, out, n); }

void softmax(float* x, int n) { detail::active_table().ops->softmax(x, n); }

int argmax(const float* x, int n) {
  // Two passes: the largest value over independent lanes (so the loop vectorizes rather than
  // waiting on one compare chain), then the first index holding it.
  constexpr int kLanes = 16;
  float lane_max[kLanes];
  std::fill(lane_max, lane_max + kLanes, -std::numeric_limits<float>::infinity());
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane_max[j] = x[i + j] > lane_max[j] ? x[i + j] : lane_max[j];
  }
  float best = -std::numeric_limits<float>::infinity();
  for (float v : lane_max) best = v > best ? v : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int k = 0; k < n; ++k) {
    if (x[k] == best) return k;
  }
  return 0;  // nothing compares (all NaN)
}

}  // namespace pagoda::kernels
