// Portable attention primitives: sequential sums and std::exp.

#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/dispatch.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int B = kAttentionBlock;

struct Portable {
  static void scores(const float* q, const float* const* k, int count, int head_dim, float scale,
                     float* s) {
    for (int i = 0; i < B; ++i) {
      if (i >= count) {
        s[i] = -INFINITY;
        continue;
      }
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += q[d] * k[i][d];
      s[i] = scale * dot;
    }
  }
  static float max(const float* s) {
    float m = s[0];
    for (int i = 1; i < B; ++i) m = s[i] > m ? s[i] : m;
    return m;
  }
  static float sum(const float* e) {
    float total = 0.0f;
    for (int i = 0; i < B; ++i) total += e[i];
    return total;
  }
  static float exp(float x) { return std::exp(x); }
  static void exp_shifted(const float* s, float m, int count, float* e) {
    for (int i = 0; i < B; ++i) e[i] = i < count ? std::exp(s[i] - m) : 0.0f;
  }
  // Position by position over all columns, so the compiler can vectorise across columns.
  static void accumulate(float* out, float alpha, const float* e, const float* const* v,
                         int count, int head_dim) {
    for (int d = 0; d < head_dim; ++d) out[d] *= alpha;
    for (int i = 0; i < count; ++i)
      for (int d = 0; d < head_dim; ++d) out[d] += e[i] * v[i][d];
  }
  static void divide(float* y, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] /= a;
  }
};

}  // namespace

extern const AttentionKernels attention_portable = {&paged_attention<Portable>};

}  // namespace pagoda::kernels::detail
