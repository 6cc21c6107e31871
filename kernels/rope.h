#pragma once
// Rotary position embedding, in the two layouts llama.cpp uses. Within each head, the first
// n = rot_dim values (all head_dim unless the rotary is partial) are rotated in n/2 pairs; pair
// i turns by the angle
//   pos · freq_scale · theta^(-2i/n) / freq_factors[i]
// (freq_scale is linear RoPE scaling, 1/factor; freq_factors are Llama 3.1's `rope_freqs` or
// Phi-3's LongRoPE factors, all 1 when the model has none), and is multiplied by attn_factor
// (LongRoPE's magnitude correction, 1 otherwise); values past n pass unchanged. Which values
// form pair i depends on the style:
//   Adjacent (llama.cpp's NORM, llama): (x[2i], x[2i+1])
//   Neox (the others):                  (x[i], x[i + n/2])
// Angles are computed in double precision and their cos/sin rounded to float once, so rope()
// and RopeTable give identical bits on every ISA, and a token's rotation depends only on its
// position (the same table whatever the batch).

#include <array>
#include <cstdint>
#include <vector>

namespace pagoda::kernels {

enum class RopeStyle { Adjacent, Neox };

struct RopeParams {
  int head_dim = 0;
  float theta = 10000.0f;
  float freq_scale = 1.0f;
  std::vector<float> freq_factors;  // rotated_dims()/2 values, or empty for all 1
  RopeStyle style = RopeStyle::Adjacent;
  int rot_dim = 0;  // values rotated per head; 0: head_dim
  float attn_factor = 1.0f;

  int rotated_dims() const { return rot_dim > 0 ? rot_dim : head_dim; }
};

// Rotates the n_heads heads of x (contiguous, head_dim each) to position pos.
void rope(float* x, int n_heads, int pos, const RopeParams& params);

// The cos/sin of every (position, pair) up to max_positions, computed once.
class RopeTable {
 public:
  RopeTable(int max_positions, const RopeParams& params);

  int max_positions() const { return max_positions_; }
  int head_dim() const { return head_dim_; }

  // Same as rope(x, n_heads, pos, params); pos < max_positions().
  void apply(float* x, int n_heads, int pos) const;

  // Multimodal RoPE (M-RoPE, Qwen2-VL): pair i turns by positions[k], k the section that
  // i mod (the sum of `sections`) falls in, sections being consecutive pair counts; the same
  // angles as apply() at that position, so equal positions give apply()'s bits. Every position
  // < max_positions().
  void apply_sections(float* x, int n_heads, const std::array<int32_t, 4>& positions,
                      const std::array<int32_t, 4>& sections) const;

 private:
  int max_positions_;
  int head_dim_;
  int rot_dim_;
  RopeStyle style_;
  std::vector<float> cos_sin_;  // [pos][pair][cos, sin]
};

}  // namespace pagoda::kernels
