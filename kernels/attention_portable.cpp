// Portable attention primitives: sequential dot products and std::exp.

#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/dispatch.h"

namespace pagoda::kernels::detail {

namespace {

struct Portable {
  static float dot(const float* a, const float* b, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += a[i] * b[i];
    return acc;
  }
  static void axpy(float* y, float a, const float* x, int n) {
    for (int i = 0; i < n; ++i) y[i] += a * x[i];
  }
  static void scale(float* y, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] *= a;
  }
  static void divide(float* y, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] /= a;
  }
  static float exp(float x) { return std::exp(x); }
  static void exp_shifted(const float* s, float m, float* e) {
    for (int i = 0; i < kAttentionBlock; ++i) e[i] = std::exp(s[i] - m);
  }
};

}  // namespace

extern const AttentionKernels attention_portable = {&paged_attention<Portable>};

}  // namespace pagoda::kernels::detail
