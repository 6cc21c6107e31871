#include "kernels/rope.h"

#include <cassert>
#include <cmath>
#include <cstddef>

namespace pagoda::kernels {

namespace {

void angle(int pos, int i, int head_dim, float theta, float* cos_sin) {
  const double freq = 1.0 / std::pow(double(theta), double(i) / double(head_dim));
  const double a = double(pos) * freq;
  cos_sin[0] = float(std::cos(a));
  cos_sin[1] = float(std::sin(a));
}

void rotate(float* x, int n_heads, int head_dim, const float* cos_sin) {
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + std::size_t(h) * head_dim;
    for (int i = 0; i < head_dim; i += 2) {
      const float c = cos_sin[i], s = cos_sin[i + 1];
      const float x0 = head[i], x1 = head[i + 1];
      head[i] = x0 * c - x1 * s;
      head[i + 1] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

void rope(float* x, int n_heads, int head_dim, int pos, float theta) {
  std::vector<float> cos_sin(head_dim);
  for (int i = 0; i < head_dim; i += 2) angle(pos, i, head_dim, theta, &cos_sin[i]);
  rotate(x, n_heads, head_dim, cos_sin.data());
}

RopeTable::RopeTable(int max_positions, int head_dim, float theta)
    : max_positions_(max_positions),
      head_dim_(head_dim),
      cos_sin_(std::size_t(max_positions) * head_dim) {
  assert(head_dim % 2 == 0);
  for (int pos = 0; pos < max_positions; ++pos)
    for (int i = 0; i < head_dim; i += 2)
      angle(pos, i, head_dim, theta, &cos_sin_[std::size_t(pos) * head_dim + i]);
}

void RopeTable::apply(float* x, int n_heads, int pos) const {
  assert(pos >= 0 && pos < max_positions_);
  rotate(x, n_heads, head_dim_, &cos_sin_[std::size_t(pos) * head_dim_]);
}

}  // namespace pagoda::kernels
