#include "kernels/rope.h"

#include <cassert>
#include <cmath>
#include <cstddef>

namespace pagoda::kernels {

namespace {

// Rotated values per head that apply_sections gathers on the stack; ModelConfig caps heads at 1024.
constexpr int kMaxRotatedDims = 1024;

// cos/sin of each of the rotated pairs' angles at `pos`, interleaved.
void angles(int pos, const RopeParams& p, float* cos_sin) {
  const int n = p.rotated_dims();
  for (int i = 0; i < n / 2; ++i) {
    double freq = double(p.freq_scale) / std::pow(double(p.theta), double(2 * i) / double(n));
    if (!p.freq_factors.empty()) freq /= double(p.freq_factors[size_t(i)]);
    const double a = double(pos) * freq;
    cos_sin[2 * i] = float(std::cos(a)) * p.attn_factor;
    cos_sin[2 * i + 1] = float(std::sin(a)) * p.attn_factor;
  }
}

void rotate(float* x, int n_heads, int head_dim, int rot_dim, RopeStyle style, const float* cos_sin) {
  const int half = rot_dim / 2;
  // The distance between the two values of a pair, and between the first values of two pairs.
  const int partner = style == RopeStyle::Adjacent ? 1 : half;
  const int step = style == RopeStyle::Adjacent ? 2 : 1;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + std::size_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      float* a = head + i * step;
      const float x0 = a[0], x1 = a[partner];
      a[0] = x0 * c - x1 * s;
      a[partner] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

void rope(float* x, int n_heads, int pos, const RopeParams& params) {
  std::vector<float> cos_sin(params.rotated_dims());
  angles(pos, params, cos_sin.data());
  rotate(x, n_heads, params.head_dim, params.rotated_dims(), params.style, cos_sin.data());
}

RopeTable::RopeTable(int max_positions, const RopeParams& params)
    : max_positions_(max_positions),
      head_dim_(params.head_dim),
      rot_dim_(params.rotated_dims()),
      style_(params.style),
      cos_sin_(std::size_t(max_positions) * rot_dim_) {
  assert(rot_dim_ % 2 == 0 && rot_dim_ <= head_dim_);
  assert(params.freq_factors.empty() || int(params.freq_factors.size()) == rot_dim_ / 2);
  for (int pos = 0; pos < max_positions; ++pos) angles(pos, params, &cos_sin_[std::size_t(pos) * rot_dim_]);
}

void RopeTable::apply(float* x, int n_heads, int pos) const {
  assert(pos >= 0 && pos < max_positions_);
  rotate(x, n_heads, head_dim_, rot_dim_, style_, &cos_sin_[std::size_t(pos) * rot_dim_]);
}

void RopeTable::apply_sections(float* x, int n_heads, const std::array<int32_t, 4>& positions,
                               const std::array<int32_t, 4>& sections) const {
  const int half = rot_dim_ / 2;
  const int period = sections[0] + sections[1] + sections[2] + sections[3];
  assert(period > 0);
  // Each pair's cos/sin from its section's row of the table, gathered once for all heads.
  float cos_sin[kMaxRotatedDims];
  assert(rot_dim_ <= kMaxRotatedDims);
  for (int i = 0; i < half; ++i) {
    int sector = i % period, k = 0;
    while (sector >= sections[size_t(k)]) sector -= sections[size_t(k++)];
    const int pos = positions[size_t(k)];
    assert(pos >= 0 && pos < max_positions_);
    const float* row = &cos_sin_[std::size_t(pos) * rot_dim_];
    cos_sin[2 * i] = row[2 * i];
    cos_sin[2 * i + 1] = row[2 * i + 1];
  }
  rotate(x, n_heads, head_dim_, rot_dim_, style_, cos_sin);
}

}  // namespace pagoda::kernels
