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
//   widen<T>(row, head_dim, f)                  f[d] = the row's values as floats (exact)
// A policy with kFusedHeads instead takes the query heads of one token together, reading each
// key and value once for all of them (each head's bits depending on its own row alone):
//   scores_heads<T>(q, heads, k, count, head_dim, scale, s, nk)      row h: q + h·head_dim → s + h·B
//   accumulate_heads<T>(out, heads, alpha, e, v, count, head_dim, nv) row h: out + h·head_dim,
//                                                                    alpha[h], e + h·B
// and, as it goes, prefetches the rows nk[i] and nv[i] of a block kPrefetchAhead on (all B of
// them, unless nk and nv are null): spread over the block, the requests do not queue up.
// Blocks are long (64 positions) so that each step's dependent chain (scores, max, exp,
// weighted sum) is amortised over much independent work.
//
// AttentionVariant's soft-capping and sliding window act on the scores between `scores` and
// the softmax, in plain scalar code shared by every ISA (std::tanh, -inf for the positions
// before the window), so they change no bit of the policy's arithmetic. A window only moves
// where a row's blocks start (the block holding its first visible position, still aligned to
// absolute position): a row's bits stay a function of its own q and positions. The masked rows
// of that block are never read from their pages (they repeat the first visible row, and their
// weight is exactly 0), so pages wholly before the first token's window may be holes. A
// bidirectional span likewise only moves where the rows of its tokens end (the span's end
// rather than their own position) and, with a window, start (the span's start when that is
// earlier): every other row is computed exactly as without it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/kv_rows.h"

namespace pagoda::kernels::detail {

inline constexpr int kAttentionBlock = 64;
// Query rows (tokens × heads) carried through the context together, sharing each block's K
// and V while they are in L1; more are split, which changes no bits since rows are independent.
inline constexpr int kAttentionRows = 32;
// Blocks ahead whose rows are prefetched while a block computes: one block of a decode token
// computes in about a microsecond, less than it takes memory to deliver the next one.
inline constexpr int kPrefetchAhead = 2;

// One block for the `heads` query rows of one token (q + h·head_dim, out + h·head_dim): the
// online softmax's step. Every entry point below takes each row through its blocks with
// exactly this arithmetic, so a row's bits never depend on its neighbours. s and e hold
// heads × kAttentionBlock floats.
template <class P, KvCacheType T>
[[gnu::always_inline]] inline void attend_block(const float* q, int heads, const std::byte* const* k,
                                                const std::byte* const* v, int count, int head_dim, float scale,
                                                float* s, float* e, float* max, float* sum, float* out, int masked,
                                                float softcap, const std::byte* const* next_k = nullptr,
                                                const std::byte* const* next_v = nullptr) {
  constexpr int B = kAttentionBlock;
  float alpha[kAttentionRows];
  if constexpr (P::kFusedHeads) {
    P::template scores_heads<T>(q, heads, k, count, head_dim, scale, s, next_k);
  } else {
    for (int h = 0; h < heads; ++h) P::template scores<T>(q + h * head_dim, k, count, head_dim, scale, s + h * B);
  }
  // Soft-capping, then the positions before the window out of the softmax.
  if (softcap > 0.0f) {
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < count; ++i) s[h * B + i] = softcap * std::tanh(s[h * B + i] / softcap);
  }
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < masked; ++i) s[h * B + i] = -__builtin_inff();
  for (int h = 0; h < heads; ++h) {
    const float block_max = P::max(s + h * B);
    alpha[h] = 1.0f;  // rescaling by exactly 1 changes no bits
    if (block_max > max[h]) {
      alpha[h] = P::exp(max[h] - block_max);
      max[h] = block_max;
    }
    P::exp_shifted(s + h * B, max[h], count, e + h * B);
    sum[h] = sum[h] * alpha[h] + P::sum(e + h * B);
  }
  if constexpr (P::kFusedHeads) {
    P::template accumulate_heads<T>(out, heads, alpha, e, v, count, head_dim, next_v);
  } else {
    for (int h = 0; h < heads; ++h)
      P::template accumulate<T>(out + h * head_dim, alpha[h], e + h * B, v, count, head_dim);
  }
}

// Asks for a row's cache lines to be brought into L2.
inline void prefetch_row(const std::byte* row, size_t row_bytes) {
  for (size_t offset = 0; offset < row_bytes; offset += 64) __builtin_prefetch(row + offset, 0, 2);
}

// The row pointers of positions p0 + first … p0 + count_all − 1 (from page, slot on) into k
// and v; the others (up to B) repeat a gathered row, so that rows before a window (first > 0)
// never touch their pages, which may have gone back to the pool. page and slot move past them.
template <int B>
inline void gather_rows(const std::byte* const* k_pages, const std::byte* const* v_pages, int first, int count_all,
                        int tokens_per_page, size_t row_bytes, int& page, int& slot, const std::byte** k,
                        const std::byte** v) {
  for (int i = first; i < count_all;) {  // runs of consecutive rows within a page
    const int left = tokens_per_page - slot;
    const int run = count_all - i < left ? count_all - i : left;
    const std::byte* kr = k_pages[page] + slot * row_bytes;
    const std::byte* vr = v_pages[page] + slot * row_bytes;
    for (int j = 0; j < run; ++j, ++i) k[i] = kr + j * row_bytes, v[i] = vr + j * row_bytes;
    slot += run;
    if (slot == tokens_per_page) slot = 0, ++page;
  }
  for (int i = 0; i < first; ++i) k[i] = k[first], v[i] = v[first];  // readable; masked out
  for (int i = count_all; i < B; ++i) k[i] = k[0], v[i] = v[0];      // readable; masked out
}

// `tokens` query tokens of one sequence at consecutive positions (token t sees the first
// n_ctx0 + t positions, or with a window the last `window` of them; in the variant's
// bidirectional span, up to the span's end), each with `heads` query heads of one KV head:
// rows (t, h) at q + t·q_stride + h·head_dim, written likewise to out. Each block's keys and
// values are gathered once for every row still inside it and, for the narrower types when
// several rows share the block, widened to floats once (P::widen, exact) rather than once per
// row; the float arithmetic on them is the same, so each row's bits are those of that row alone.
template <class P, KvCacheType T>
void attend_rows(const float* q, size_t q_stride, int tokens, int heads, int head_dim, int n_ctx0,
                 const std::byte* const* k_pages, const std::byte* const* v_pages, int tokens_per_page, float scale,
                 float* out, size_t out_stride, AttentionVariant variant) {
  constexpr int B = kAttentionBlock;
  const size_t row_bytes = kv_row_bytes(T, head_dim);
  alignas(64) float s[kAttentionRows * B];
  alignas(64) float e[kAttentionRows * B];
  // Row pointers of the block being computed and of the kPrefetchAhead blocks after it.
  const std::byte* ring_k[kPrefetchAhead + 1][B];
  const std::byte* ring_v[kPrefetchAhead + 1][B];
  const std::byte* kw[B];
  const std::byte* vw[B];
  static thread_local std::vector<float> wide;  // [2][B][head_dim]; grows once per thread
  float max[kAttentionRows], sum[kAttentionRows];
  for (int r = 0; r < tokens * heads; ++r) max[r] = -__builtin_inff(), sum[r] = 0.0f;
  for (int t = 0; t < tokens; ++t)
    for (int d = 0; d < heads * head_dim; ++d) out[t * out_stride + d] = 0.0f;
  // Token t's query is at position n_ctx0 + t - 1; it sees positions first_visible(t) …
  // visible_end(t) - 1. Both are non-decreasing in t, span or not (a token before the span sees
  // less than the span's tokens, which see less than the tokens after it), so the first token's
  // first visible position is the call's earliest and the last token's end its latest.
  auto in_span = [&](int t) {
    return n_ctx0 + t - 1 >= variant.bidirectional_begin && n_ctx0 + t - 1 < variant.bidirectional_end;
  };
  auto visible_end = [&](int t) { return in_span(t) ? variant.bidirectional_end : n_ctx0 + t; };
  auto first_visible = [&](int t) {
    const int lo = n_ctx0 + t - variant.window;
    if (variant.window <= 0 || lo <= 0) return 0;
    return in_span(t) && variant.bidirectional_begin < lo ? variant.bidirectional_begin : lo;
  };
  const int n_last = visible_end(tokens - 1);
  const int n_blocks = (n_last + B - 1) / B;
  // Reading starts at the first token's first visible position: the pages before it may be
  // holes (block_table.h), and that block's earlier rows are masked out anyway.
  const int lo0 = first_visible(0);
  const int b_first = lo0 / B;
  int page = lo0 / tokens_per_page, slot = lo0 % tokens_per_page, gathered = b_first;
  auto gather_next = [&] {
    const int p0 = gathered * B, at = gathered % (kPrefetchAhead + 1);
    gather_rows<B>(k_pages, v_pages, gathered == b_first ? lo0 - p0 : 0, n_last - p0 < B ? n_last - p0 : B,
                   tokens_per_page, row_bytes, page, slot, ring_k[at], ring_v[at]);
    ++gathered;
  };
  auto prefetch_block = [&](int b) {
    for (int i = 0; i < B; ++i)
      prefetch_row(ring_k[b % (kPrefetchAhead + 1)][i], row_bytes),
          prefetch_row(ring_v[b % (kPrefetchAhead + 1)][i], row_bytes);
  };
  for (int b = b_first; b < n_blocks && b < b_first + kPrefetchAhead; ++b) {
    gather_next();
    if (b > b_first) prefetch_block(b);
  }
  for (int b = b_first; b < n_blocks; ++b) {
    const int p0 = b * B;
    const int count_all = n_last - p0 < B ? n_last - p0 : B;
    const std::byte* const* k = ring_k[b % (kPrefetchAhead + 1)];
    const std::byte* const* v = ring_v[b % (kPrefetchAhead + 1)];
    // The rows kPrefetchAhead blocks on, to prefetch while this one computes.
    const bool has_next = b + kPrefetchAhead < n_blocks;
    if (has_next) gather_next();
    const std::byte* const* nk = ring_k[(b + kPrefetchAhead) % (kPrefetchAhead + 1)];
    const std::byte* const* nv = ring_v[(b + kPrefetchAhead) % (kPrefetchAhead + 1)];
    int t0 = 0;  // the first token that sees position p0
    while (visible_end(t0) <= p0) ++t0;
    // Widened once when several calls would each widen the block: tokens, or heads unless
    // the policy takes a token's heads together.
    const bool widen = T != KvCacheType::F32 && (tokens - t0 > 1 || (!P::kFusedHeads && heads > 1));
    // A fused call for one token (never widened) spreads the prefetch over its block;
    // otherwise it goes here at once.
    const bool spread = P::kFusedHeads && tokens - t0 == 1;
    if (has_next && !spread) prefetch_block(b + kPrefetchAhead);
    if (widen) {
      if (wide.size() < size_t(2 * B * head_dim)) wide.resize(size_t(2 * B * head_dim));
      float* wk = wide.data();
      float* wv = wk + B * head_dim;
      for (int i = 0; i < count_all; ++i) {
        P::template widen<T>(k[i], head_dim, wk + i * head_dim);
        P::template widen<T>(v[i], head_dim, wv + i * head_dim);
      }
      for (int i = 0; i < B; ++i) {
        const int row = i < count_all ? i : 0;
        kw[i] = reinterpret_cast<const std::byte*>(wk + row * head_dim);
        vw[i] = reinterpret_cast<const std::byte*>(wv + row * head_dim);
      }
    }
    for (int t = t0; t < tokens; ++t) {
      const int lo = first_visible(t);
      if (lo >= p0 + B) break;  // this token's window starts past the block, and later ones' too
      const int masked = lo > p0 ? lo - p0 : 0;
      const int count = visible_end(t) - p0 < B ? visible_end(t) - p0 : B;
      const float* qt = q + t * q_stride;
      float* o = out + t * out_stride;
      const int r = t * heads;
      if (widen) {
        attend_block<P, KvCacheType::F32>(qt, heads, kw, vw, count, head_dim, scale, s, e, max + r, sum + r, o, masked,
                                          variant.softcap);
      } else {
        attend_block<P, T>(qt, heads, k, v, count, head_dim, scale, s, e, max + r, sum + r, o, masked, variant.softcap,
                           has_next && spread ? nk : nullptr, has_next && spread ? nv : nullptr);
      }
    }
  }
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) P::divide(out + t * out_stride + h * head_dim, sum[t * heads + h], head_dim);
}

// Splits the rows into calls of at most kAttentionRows, which changes no bits.
template <class P, KvCacheType T>
void paged_attention_tokens(const float* q, size_t q_stride, int tokens, int group, int head_dim, int n_ctx0,
                            const std::byte* const* k_pages, const std::byte* const* v_pages, int tokens_per_page,
                            float scale, float* out, size_t out_stride, AttentionVariant variant) {
  const int heads = group < kAttentionRows ? group : kAttentionRows;
  const int per_call = kAttentionRows / heads;
  for (int h0 = 0; h0 < group; h0 += heads) {
    const int hn = group - h0 < heads ? group - h0 : heads;
    for (int t0 = 0; t0 < tokens; t0 += per_call) {
      const int tn = tokens - t0 < per_call ? tokens - t0 : per_call;
      attend_rows<P, T>(q + t0 * q_stride + h0 * head_dim, q_stride, tn, hn, head_dim, n_ctx0 + t0, k_pages, v_pages,
                        tokens_per_page, scale, out + t0 * out_stride + h0 * head_dim, out_stride, variant);
    }
  }
}

template <class P, KvCacheType T>
void paged_attention(const float* q, int group, int head_dim, int n_ctx, const std::byte* const* k_pages,
                     const std::byte* const* v_pages, int tokens_per_page, float scale, float* out) {
  paged_attention_tokens<P, T>(q, 0, 1, group, head_dim, n_ctx, k_pages, v_pages, tokens_per_page, scale, out, 0, {});
}

}  // namespace pagoda::kernels::detail

namespace pagoda::kernels::detail {

// The table entries of policy P, one per KV cache type, in KvCacheType order.
template <class P>
constexpr AttentionKernels attention_kernels_of() {
  return {{&paged_attention<P, KvCacheType::F32>, &paged_attention<P, KvCacheType::F16>,
           &paged_attention<P, KvCacheType::BF16>, &paged_attention<P, KvCacheType::Q8_0>},
          {&paged_attention_tokens<P, KvCacheType::F32>, &paged_attention_tokens<P, KvCacheType::F16>,
           &paged_attention_tokens<P, KvCacheType::BF16>, &paged_attention_tokens<P, KvCacheType::Q8_0>}};
}

}  // namespace pagoda::kernels::detail
