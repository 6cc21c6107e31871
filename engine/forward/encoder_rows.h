#pragma once
// Row-wise steps the encoders share (bert's EncoderRunner, the vision encoders): LayerNorm and
// bias-plus-residual over rows stacked from many inputs. Each row's result is a function of
// that row alone, reduced in a fixed order, so it does not depend on the other rows of a batch
// or on the thread count.

#include <cstdint>
#include <vector>

namespace pagoda {

// Rows per task of the row-wise loops.
inline constexpr int32_t kRowGrain = 8;

// Σ f(v[j]) over n floats as 16 lane sums (lane l takes j ≡ l mod 16), folded in a fixed order:
// the compiler vectorizes it, and the result is a function of the row alone.
template <class F>
float lane_sum(const float* v, int32_t n, F&& f) {
  constexpr int32_t kLanes = 16;
  float lanes[kLanes] = {};
  int32_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int32_t l = 0; l < kLanes; ++l) lanes[l] += f(v[j + l]);
  for (; j < n; ++j) lanes[j % kLanes] += f(v[j]);
  for (int32_t width = kLanes / 2; width > 0; width /= 2)
    for (int32_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// out[r] = LayerNorm(in[r]) · weight + bias for each of `rows` rows of `dim` (`stride` floats
// apart; 0: dim), as ggml_norm computes it (the mean, then the variance of the centred row),
// then ggml_mul and ggml_add. No bias adds nothing. In parallel in the caller's task arena.
void layer_norm_rows(const float* in, float* out, int32_t rows, int32_t dim, const std::vector<float>& weight,
                     const std::vector<float>& bias, float eps, int32_t stride = 0);

// x[r][j] += bias[j] (when there is one), then += residual[r][j] (when given).
void add_bias_rows(float* x, int32_t rows, int32_t width, const std::vector<float>& bias,
                   const float* residual = nullptr);

}  // namespace pagoda
