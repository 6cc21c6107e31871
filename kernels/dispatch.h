#pragma once
// Internal: the per-ISA kernel tables. Each *_portable/_avx2/_avx512 translation unit fills in
// one table; the public entry points look the table up once per call, never per element.

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"

namespace pagoda::kernels::detail {

// The largest register tile height any GEMM kernel uses.
inline constexpr int kMaxTileRows = 16;

// One call of a GEMM tile kernel: `rows` rows of A (the kernel's own height) by one packed
// panel of NR columns, over `depth` values of k:
//   C[r][j] = (load_c ? C[r][j] : 0) + Σ_k A[r][k]·panel[k][j], for j < n_valid,
// each output accumulated over k in order with one multiply-add per step, so its bits depend
// only on its own row of A and column of W. Meanwhile the kernel pulls `prefetch_lines` cache
// lines from `prefetch` into L2 (the weights the task needs next), spread over its k steps,
// so streaming weights from memory overlaps the arithmetic.
struct GemmTile {
  const float* a;
  int lda;
  const float* panel;
  int depth;
  float* c;
  int ldc;
  int n_valid;
  bool load_c;
  const char* prefetch;
  int prefetch_lines;
};

using GemmTileFn = void (*)(const GemmTile& tile);

struct GemmKernels {
  int tile_rows;                      // MR: rows of a full tile
  int panel_cols;                     // NR: columns per packed panel
  GemmTileFn tile[kMaxTileRows + 1];  // tile[r] computes r rows, 1 <= r <= tile_rows
};

struct OpsKernels {
  void (*rmsnorm)(const float* x, const float* weight, float* out, int n, float eps);
  void (*swiglu)(const float* gate, const float* up, float* out, int n);
  void (*softmax)(float* x, int n);
  void (*gelu)(const float* x, float* out, int n);
  // Narrowing a row to IEEE half / bfloat16, as kernels/half.h's scalar conversions do, bit
  // for bit (round to nearest even; NaN kept quiet with its upper payload bits).
  void (*to_f16)(const float* x, uint16_t* out, int n);
  void (*to_bf16)(const float* x, uint16_t* out, int n);
};

using PagedAttentionFn = void (*)(const float* q, int group, int head_dim, int n_ctx, const std::byte* const* k_pages,
                                  const std::byte* const* v_pages, int tokens_per_page, float scale, float* out);

using PagedAttentionTokensFn = void (*)(const float* q, size_t q_stride, int tokens, int group, int head_dim,
                                        int n_ctx0, const std::byte* const* k_pages, const std::byte* const* v_pages,
                                        int tokens_per_page, float scale, float* out, size_t out_stride,
                                        AttentionVariant variant);

struct AttentionKernels {
  PagedAttentionFn paged_attention[4];  // indexed by KvCacheType
  PagedAttentionTokensFn paged_attention_tokens[4];
};

extern const GemmKernels gemm_portable, gemm_avx2, gemm_avx512;
extern const OpsKernels ops_portable, ops_avx2, ops_avx512;
extern const AttentionKernels attention_portable, attention_avx2, attention_avx512;

struct KernelTable {
  Isa isa;
  const GemmKernels* gemm;
  const OpsKernels* ops;
  const AttentionKernels* attention;
};

const KernelTable& table_for(Isa isa);
const KernelTable& active_table();
void activate(Isa isa);
Isa initial_isa();  // PAGODA_ISA or detection, decided once

}  // namespace pagoda::kernels::detail
