#pragma once
// Attention of one query token over a sequence's cached keys and values, for one KV head and
// the `group` query heads that share it (GQA), with an online softmax that never holds all
// n_ctx scores.
//
// Each query head's output is a fixed function of its own q and positions 0..n_ctx-1 taken in
// order: the same bits whatever the caller's chunking, the head's place in the group, or the
// page size (positions are processed in blocks aligned to absolute position, not to pages).
// Keys and values may be stored in any KV cache type; they are converted to float in
// registers (to exactly the floats load_kv_row gives) and the arithmetic is then the same.

#include <cstddef>

#include "pagoda/kv_cache_type.h"

namespace pagoda::kernels {

// What a layer's attention adds to plain causal attention; the default adds nothing.
struct AttentionVariant {
  int window = 0;        // > 0: the query at position p sees only positions p - window + 1 … p
  float softcap = 0.0f;  // > 0: each score s (already scaled) becomes softcap·tanh(s / softcap)
  // bidirectional_begin < bidirectional_end: a span of positions that attend to each other both
  // ways (one of Gemma 3's images). A query in it sees every position of the span, later ones
  // too, besides what it sees anyway: with a window, the positions of its own window and the
  // span's, as transformers ORs an image's block into Gemma 3's causal and sliding masks. Queries
  // outside the span see what they would without it.
  int bidirectional_begin = 0, bidirectional_end = 0;
};

// q and out are [group][head_dim]. Position p's key is the row of head_dim values of `type`
// (kv_row_bytes(type, head_dim) bytes) at slot p % tokens_per_page of k_pages[p /
// tokens_per_page], and likewise its value. Scores are scale·q·k; n_ctx must be positive and
// head_dim must fit the type (kv_row_fits).
void paged_attention(KvCacheType type, const float* q, int group, int head_dim, int n_ctx,
                     const std::byte* const* k_pages, const std::byte* const* v_pages, int tokens_per_page, float scale,
                     float* out);

// `tokens` query tokens of one sequence at consecutive positions, token t seeing the first
// n_ctx0 + t positions (a prefill chunk): q + t·q_stride and out + t·out_stride are token t's
// [group][head_dim]. Each output has the bits paged_attention gives that token alone; the
// tokens share each block of keys and values (read, and widened to floats, once). With a
// `variant` window, no position before the first token's window is read, so the page pointers
// of pages wholly before it may be null. A token in the variant's bidirectional span also sees
// the span's later positions, whose keys and values must be in the pages; its output is then a
// fixed function of its q and the positions it sees, as any token's is, whoever shares the call.
void paged_attention_tokens(KvCacheType type, const float* q, size_t q_stride, int tokens, int group, int head_dim,
                            int n_ctx0, const std::byte* const* k_pages, const std::byte* const* v_pages,
                            int tokens_per_page, float scale, float* out, size_t out_stride,
                            AttentionVariant variant = {});

// The same over f32 pages.
void paged_attention(const float* q, int group, int head_dim, int n_ctx, const float* const* k_pages,
                     const float* const* v_pages, int tokens_per_page, float scale, float* out);

// The same over contiguous f32 [n_ctx][head_dim] keys and values (a benchmark baseline).
void attention_contiguous(const float* q, int group, int head_dim, int n_ctx, const float* k, const float* v,
                          float scale, float* out);

}  // namespace pagoda::kernels
