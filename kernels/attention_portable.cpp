// Portable attention primitives: sequential sums and std::exp; keys and values are converted
// to float one value at a time.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention_impl.h"
#include "kernels/half.h"

namespace pagoda::kernels::detail {

namespace {

constexpr int B = kAttentionBlock;

// Value d of a row of type T.
template <KvCacheType T>
float value(const std::byte* row, int d) {
  if constexpr (T == KvCacheType::F32) {
    float x;
    std::memcpy(&x, row + 4 * d, 4);
    return x;
  } else if constexpr (T == KvCacheType::Q8_0) {
    const std::byte* block = row + size_t(d / kQ8_0Block) * kQ8_0BlockBytes;
    uint16_t scale;
    std::memcpy(&scale, block, 2);
    return float(int8_t(block[2 + d % kQ8_0Block])) * f16_to_f32(scale);
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * d, 2);
    return T == KvCacheType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

struct Portable {
  static constexpr bool kFusedHeads = false;
  template <KvCacheType T>
  static void scores(const float* q, const std::byte* const* k, int count, int head_dim, float scale, float* s) {
    for (int i = 0; i < B; ++i) {
      if (i >= count) {
        s[i] = -INFINITY;
        continue;
      }
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += q[d] * value<T>(k[i], d);
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
  template <KvCacheType T>
  static void accumulate(float* out, float alpha, const float* e, const std::byte* const* v, int count, int head_dim) {
    for (int d = 0; d < head_dim; ++d) out[d] *= alpha;
    for (int i = 0; i < count; ++i)
      for (int d = 0; d < head_dim; ++d) out[d] += e[i] * value<T>(v[i], d);
  }
  template <KvCacheType T>
  static void widen(const std::byte* row, int head_dim, float* f) {
    for (int d = 0; d < head_dim; ++d) f[d] = value<T>(row, d);
  }
  static void divide(float* y, float a, int n) {
    for (int i = 0; i < n; ++i) y[i] /= a;
  }
};

}  // namespace

extern const AttentionKernels attention_portable = attention_kernels_of<Portable>();

}  // namespace pagoda::kernels::detail
