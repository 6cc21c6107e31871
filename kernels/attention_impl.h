#pragma once
// Internal: the online-softmax attention loop shared by every ISA, parameterised by a policy
// of vector primitives. Each *_<isa>.cpp instantiates it with a policy type of its own
// anonymous namespace, so every instantiation stays local to its translation unit (compiled
// with that ISA's flags) and none can be merged with another's.
//
// Policy: static float dot(const float* a, const float* b, int n);
//         static void axpy(float* y, float a, const float* x, int n);   // y += a·x
//         static void scale(float* y, float a, int n);                  // y *= a
//         static void divide(float* y, float a, int n);                 // y /= a
//         static float exp(float x);
//         static void exp_shifted(const float* s, float m, float* e);   // e[i] = exp(s[i]-m), i < kBlock

namespace pagoda::kernels::detail {

// Positions per online-softmax step; blocks start at multiples of kBlock.
inline constexpr int kAttentionBlock = 16;
// Query heads handled together; larger groups are split, each head being independent anyway.
inline constexpr int kAttentionHeads = 8;

template <class P>
void attend_heads(const float* q, int heads, int head_dim, int n_ctx, const float* const* k_pages,
                  const float* const* v_pages, int tokens_per_page, float scale, float* out) {
  constexpr int B = kAttentionBlock;
  float max[kAttentionHeads], sum[kAttentionHeads];
  alignas(64) float s[kAttentionHeads][B];
  alignas(64) float e[kAttentionHeads][B];
  const float* k[B];
  const float* v[B];
  for (int h = 0; h < heads; ++h) {
    max[h] = -__builtin_inff();
    sum[h] = 0.0f;
    for (int d = 0; d < head_dim; ++d) out[h * head_dim + d] = 0.0f;
  }
  int page = 0, slot = 0;
  for (int p0 = 0; p0 < n_ctx; p0 += B) {
    const int count = n_ctx - p0 < B ? n_ctx - p0 : B;
    for (int i = 0; i < count; ++i) {
      k[i] = k_pages[page] + slot * head_dim;
      v[i] = v_pages[page] + slot * head_dim;
      if (++slot == tokens_per_page) slot = 0, ++page;
    }
    for (int h = 0; h < heads; ++h) {
      const float* qh = q + h * head_dim;
      float block_max = -__builtin_inff();
      for (int i = 0; i < B; ++i) {
        s[h][i] = i < count ? scale * P::dot(qh, k[i], head_dim) : -__builtin_inff();
        block_max = s[h][i] > block_max ? s[h][i] : block_max;
      }
      if (block_max > max[h]) {
        const float alpha = P::exp(max[h] - block_max);
        sum[h] *= alpha;
        P::scale(out + h * head_dim, alpha, head_dim);
        max[h] = block_max;
      }
      P::exp_shifted(s[h], max[h], e[h]);
      for (int i = 0; i < count; ++i) sum[h] += e[h][i];
    }
    for (int i = 0; i < count; ++i)
      for (int h = 0; h < heads; ++h) P::axpy(out + h * head_dim, e[h][i], v[i], head_dim);
  }
  for (int h = 0; h < heads; ++h) P::divide(out + h * head_dim, sum[h], head_dim);
}

template <class P>
void paged_attention(const float* q, int group, int head_dim, int n_ctx,
                     const float* const* k_pages, const float* const* v_pages,
                     int tokens_per_page, float scale, float* out) {
  for (int h0 = 0; h0 < group; h0 += kAttentionHeads) {
    const int heads = group - h0 < kAttentionHeads ? group - h0 : kAttentionHeads;
    attend_heads<P>(q + h0 * head_dim, heads, head_dim, n_ctx, k_pages, v_pages, tokens_per_page,
                    scale, out + h0 * head_dim);
  }
}

}  // namespace pagoda::kernels::detail
