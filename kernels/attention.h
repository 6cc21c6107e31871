#pragma once
// Attention of one query token over a sequence's cached keys and values, for one KV head and
// the `group` query heads that share it (GQA), with an online softmax that never holds all
// n_ctx scores.
//
// Each query head's output is a fixed function of its own q and positions 0..n_ctx-1 taken in
// order: the same bits whatever the caller's chunking, the head's place in the group, or the
// page size (positions are processed in blocks aligned to absolute position, not to pages).

namespace pagoda::kernels {

// q and out are [group][head_dim]. Position p's key is head_dim floats at
// k_pages[p / tokens_per_page] + (p % tokens_per_page) * head_dim, and likewise its value.
// Scores are scale·q·k; n_ctx must be positive.
void paged_attention(const float* q, int group, int head_dim, int n_ctx,
                     const float* const* k_pages, const float* const* v_pages,
                     int tokens_per_page, float scale, float* out);

// The same over contiguous [n_ctx][head_dim] keys and values (a benchmark baseline).
void attention_contiguous(const float* q, int group, int head_dim, int n_ctx, const float* k,
                          const float* v, float scale, float* out);

}  // namespace pagoda::kernels
