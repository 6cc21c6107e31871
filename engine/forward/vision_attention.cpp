#include "engine/forward/vision_attention.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace pagoda {

namespace {

// Queries per task: a block's scores ([block][n]) stay small even for a whole large image.
constexpr int32_t kQueryBlock = 128;

}  // namespace

void segment_attention(const float* qkv, int32_t n_heads, int32_t head_dim, std::span<const AttentionSegment> segments,
                       float* out, AttentionScratch& scratch) {
  const int32_t dim = n_heads * head_dim;
  const size_t stride = 3 * size_t(dim);
  const auto n_segments = int32_t(segments.size());
  const int32_t tasks = n_heads * n_segments;
  scratch.keys.resize(size_t(tasks));
  scratch.values.resize(size_t(tasks));
  // Each (head, segment)'s keys and transposed values, packed once as the two GEMMs' operands:
  // scores = Q·Kᵀ, then out = P·V = P·(Vᵀ)ᵀ.
  tbb::parallel_for(0, tasks, [&](int32_t t) {
    const int32_t h = t / n_segments;
    const AttentionSegment segment = segments[size_t(t % n_segments)];
    const auto n = size_t(segment.n);
    std::vector<float> keys(n * size_t(head_dim)), values_t(n * size_t(head_dim));
    for (size_t j = 0; j < n; ++j) {
      const float* row = qkv + (size_t(segment.first) + j) * stride + size_t(h) * head_dim;
      std::copy_n(row + dim, head_dim, keys.data() + j * size_t(head_dim));
      for (int32_t d = 0; d < head_dim; ++d) values_t[size_t(d) * n + j] = row[2 * dim + d];
    }
    scratch.keys[size_t(t)] = kernels::PackedMatrix::pack(keys.data(), segment.n, head_dim);
    scratch.values[size_t(t)] = kernels::PackedMatrix::pack(values_t.data(), head_dim, segment.n);
  });
  // Then every block of queries of every (head, segment) on its own.
  std::vector<int32_t> first_block(size_t(tasks) + 1, 0);
  for (int32_t t = 0; t < tasks; ++t) {
    const int32_t n = segments[size_t(t % n_segments)].n;
    first_block[size_t(t) + 1] = first_block[size_t(t)] + (n + kQueryBlock - 1) / kQueryBlock;
  }
  const float scale = 1.0f / std::sqrt(float(head_dim));
  tbb::parallel_for(0, first_block.back(), [&](int32_t b) {
    const auto t = int32_t(std::upper_bound(first_block.begin(), first_block.end(), b) - first_block.begin()) - 1;
    const int32_t h = t / n_segments;
    const AttentionSegment segment = segments[size_t(t % n_segments)];
    const int32_t q0 = (b - first_block[size_t(t)]) * kQueryBlock;
    const int32_t m = std::min(kQueryBlock, segment.n - q0);
    const auto n = size_t(segment.n);
    std::vector<float> scores(size_t(m) * n);
    const size_t row = size_t(segment.first) + size_t(q0);
    kernels::matmul(qkv + row * stride + size_t(h) * head_dim, m, int(stride), scratch.keys[size_t(t)], scores.data(),
                    segment.n);
    for (int32_t i = 0; i < m; ++i) {
      float* s = scores.data() + size_t(i) * n;
      for (size_t j = 0; j < n; ++j) s[j] *= scale;
      kernels::softmax(s, segment.n);
    }
    kernels::matmul(scores.data(), m, segment.n, scratch.values[size_t(t)],
                    out + row * size_t(dim) + size_t(h) * head_dim, dim);
  });
}

VisionRope::VisionRope(int32_t head_dim, float theta) : head_dim_(head_dim), theta_(theta) {}

void VisionRope::reserve(int32_t max_position) {
  if (max_position <= positions_) return;
  const int32_t quarter = head_dim_ / 4;
  cos_sin_.resize(size_t(max_position) * size_t(quarter) * 2);
  for (int32_t p = positions_; p < max_position; ++p) {
    for (int32_t i = 0; i < quarter; ++i) {
      const double angle = double(p) * std::pow(theta_, -4.0 * double(i) / double(head_dim_));
      float* cs = cos_sin_.data() + (size_t(p) * size_t(quarter) + size_t(i)) * 2;
      cs[0] = float(std::cos(angle));
      cs[1] = float(std::sin(angle));
    }
  }
  positions_ = max_position;
}

void VisionRope::apply(float* row, int32_t n_heads, int32_t y, int32_t x) const {
  const int32_t quarter = head_dim_ / 4, half = head_dim_ / 2;
  const float* by_y = cos_sin_.data() + size_t(y) * size_t(quarter) * 2;
  const float* by_x = cos_sin_.data() + size_t(x) * size_t(quarter) * 2;
  auto turn = [](float& a, float& b, const float* cs) {
    const float a0 = a, b0 = b;
    a = a0 * cs[0] - b0 * cs[1];
    b = a0 * cs[1] + b0 * cs[0];
  };
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = row + size_t(h) * head_dim_;
    for (int32_t i = 0; i < quarter; ++i) turn(v[i], v[i + half], by_y + 2 * i);
    for (int32_t i = 0; i < quarter; ++i) turn(v[quarter + i], v[quarter + i + half], by_x + 2 * i);
  }
}

}  // namespace pagoda
