#pragma once
// Rotary position embedding in llama's adjacent-pair layout: in each head of head_dim values,
// the pair (x[i], x[i+1]) for i = 0, 2, ..., head_dim-2 is rotated by pos · theta^(-i/head_dim).
// Angles are computed in double precision and their cos/sin rounded to float once, so rope()
// and RopeTable give identical bits, on every ISA.

#include <vector>

namespace pagoda::kernels {

// Rotates the n_heads heads of x (contiguous, head_dim each) to position pos.
void rope(float* x, int n_heads, int head_dim, int pos, float theta);

// The cos/sin of every (position, pair) up to max_positions, computed once.
class RopeTable {
 public:
  RopeTable(int max_positions, int head_dim, float theta);

  int max_positions() const { return max_positions_; }
  int head_dim() const { return head_dim_; }

  // Same as rope(x, n_heads, head_dim(), pos, theta); pos < max_positions().
  void apply(float* x, int n_heads, int pos) const;

 private:
  int max_positions_;
  int head_dim_;
  std::vector<float> cos_sin_;  // [pos][pair][cos, sin]
};

}  // namespace pagoda::kernels
