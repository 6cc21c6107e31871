#pragma once
// Internal: the online-softmax attention loop shared by every ISA, parameterised by a policy
// of block primitives. Each attention_<isa>.cpp instantiates it with a policy type from its
// own anonymous namespace, so every instantiation stays local to its translation unit
// (compiled with that ISA's flags) and none can be merged with another's.
//
// Positions are taken in blocks of kAttentionBlock aligned to absolute position (not to
// pages), and each block's arithmetic is a fixed function of its positions, so a head's
// result depends on nothing but its q and positions 0..n_ctx-1.
//
// Policy, for one query head and one block (k and v hold kAttentionBlock row pointers, all
// readable; only the first `count` are positions of the context). Rows are in the KV cache's
// element type T, which the policy converts to float in registers (T = F32 reads them as is):
//   scores<T>(q, k, count, head_dim, scale, s)  s[i] = scale·q·k[i] for i < count, -inf after
//   max(s), sum(e)                              over the block, in a fixed order
//   exp(x); exp_shifted(s, m, count, e)         e[i] = exp(s[i] - m) (0 from count on)
//   accumulate<T>(out, alpha, e, v, count, hd)  out = out·alpha + Σ_{i<count} e[i]·v[i] (in an
//                                               order of the policy's choosing)
//   divide(out, a, n)                           out /= a
// Blocks are long (64 positions) so that each step's dependent chain (scores, max, exp,
// weighted sum) is amortised over much independent work.

#include <cstddef>

#include "kernels/dispatch.h"
#include "kernels/kv_rows.h"

namespace pagoda::kernels::detail {

inline constexpr int kAttentionBlock = 64;
// Query heads carried through the context together, sharing each block's K and V while they
// are in L1; larger groups are split, which changes no bits since heads are independent.
inline constexpr int kAttentionHeads = 8;

template <class P, KvCacheType T>
void attend_heads(const float* q, int heads, int head_dim, int n_ctx, const std::byte* const* k_pages,
                  const std::byte* const* v_pages, int tokens_per_page, float scale, float* out) {
  constexpr int B = kAttentionBlock;
  const size_t row_bytes = kv_row_bytes(T, head_dim);
  alignas(64) float s[B];
  alignas(64) float e[B];
  const std::byte* k[B];
  const std::byte* v[B];
  float max[kAttentionHeads], sum[kAttentionHeads];
  for (int h = 0; h < heads; ++h) max[h] = -__builtin_inff(), sum[h] = 0.0f;
  for (int d = 0; d < heads * head_dim; ++d) out[d] = 0.0f;
  int page = 0, slot = 0;
  for (int p0 = 0; p0 < n_ctx; p0 += B) {
    const int count = n_ctx - p0 < B ? n_ctx - p0 : B;
    for (int i = 0; i < count;) {  // runs of consecutive rows within a page
      const int left = tokens_per_page - slot;
      const int run = count - i < left ? count - i : left;
      const std::byte* kr = k_pages[page] + slot * row_bytes;
      const std::byte* vr = v_pages[page] + slot * row_bytes;
      for (int j = 0; j < run; ++j, ++i) k[i] = kr + j * row_bytes, v[i] = vr + j * row_bytes;
      slot += run;
      if (slot == tokens_per_page) slot = 0, ++page;
    }
    for (int i = count; i < B; ++i) k[i] = k[0], v[i] = v[0];  // readable; masked out
    for (int h = 0; h < heads; ++h) {
      P::template scores<T>(q + h * head_dim, k, count, head_dim, scale, s);
      const float block_max = P::max(s);
      float alpha = 1.0f;  // rescaling by exactly 1 changes no bits
      if (block_max > max[h]) {
        alpha = P::exp(max[h] - block_max);
        max[h] = block_max;
      }
      P::exp_shifted(s, max[h], count, e);
      sum[h] = sum[h] * alpha + P::sum(e);
      P::template accumulate<T>(out + h * head_dim, alpha, e, v, count, head_dim);
    }
  }
  for (int h = 0; h < heads; ++h) P::divide(out + h * head_dim, sum[h], head_dim);
}

template <class P, KvCacheType T>
void paged_attention(const float* q, int group, int head_dim, int n_ctx,
                     const std::byte* const* k_pages, const std::byte* const* v_pages,
                     int tokens_per_page, float scale, float* out) {
  for (int h0 = 0; h0 < group; h0 += kAttentionHeads) {
    const int heads = group - h0 < kAttentionHeads ? group - h0 : kAttentionHeads;
    attend_heads<P, T>(q + h0 * head_dim, heads, head_dim, n_ctx, k_pages, v_pages, tokens_per_page,
                    scale, out + h0 * head_dim);
  }
}

}  // namespace pagoda::kernels::detail

namespace pagoda::kernels::detail {

// The table entries of policy P, one per KV cache type, in KvCacheType order.
template <class P>
constexpr AttentionKernels attention_kernels_of() {
  return {{&paged_attention<P, KvCacheType::F32>, &paged_attention<P, KvCacheType::F16>,
           &paged_attention<P, KvCacheType::BF16>, &paged_attention<P, KvCacheType::Q8_0>}};
}

}  // namespace pagoda::kernels::detail
