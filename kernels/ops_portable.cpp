// Portable row ops: sequential sums, std::exp, the formulas exactly as ops.h states them.

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/half.h"

namespace pagoda::kernels::detail {

namespace {

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu(const float* x, float* out, int n) {
  constexpr float kMinusTwoSqrt2OverPi = -2.0f * 0.7978845608f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = v / (1.0f + std::exp(kMinusTwoSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void softmax(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

void to_f16(const float* x, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

void to_bf16(const float* x, uint16_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace

extern const OpsKernels ops_portable = {&rmsnorm, &swiglu, &softmax, &gelu, &to_f16, &to_bf16};

}  // namespace pagoda::kernels::detail
