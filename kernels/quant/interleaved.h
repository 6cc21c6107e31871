#pragma once
// Internal to kernels/quant: quantized weight matrices repacked once, at load, into groups of
// 16 rows whose blocks are interleaved for integer dot products, and the kernels over them.
//
// Why: one 512-bit integer dot product (vpdpbusd) then advances 16 rows by 4 elements each,
// so every output's block total is formed in one lane and the float work per block is one
// vector for 16 outputs; decode streams one contiguous array; batched steps reuse each loaded
// tile for several activation rows.
//
// Layout. Rows are taken 16 at a time (the last group padded with zero rows). A group is its
// blocks in order (32 elements for Q4_0 … Q8_0 and IQ4_NL, 256 for the K-quants and IQ4_XS),
// each a "tile" holding
// the 16 rows' block; groups lie back to back. Quants sit in "k-groups" of 64 bytes: 4
// consecutive elements of each row, row r's at bytes 4r … 4r + 3. A 4-bit "nibble load" of 64
// bytes carries two k-groups (low and high nibbles), a 2-bit "crumb load" four (bits 2c, 2c + 1
// = crumb c); a fifth (Q3_K: third) bit comes from a 64-bit mask per nibble half or crumb (bit
// 4r + e for byte 4r + e); f16 scales are 16 halves, row order; K-quant sub-block scales and
// mins are 16 bytes (row order) per sub-block. Tiles, byte offsets:
//   Q8_0  d[16] @0 | q (int8): k-group g @32 + 64g                                   544
//   Q4_0  d @0 | nibbles @32: load i low = k-group i, high = k-group 4 + i           288
//   Q4_1  d @0 | m @32 | nibbles @64 (as Q4_0)                                        320
//   Q5_0  d @0 | masks @32: load i low, high | nibbles @96 (as Q4_0)                  352
//   Q5_1  d @0 | m @32 | masks @64 | nibbles @128                                     384
//   Q4_K  d @0 | dmin @32 | sc[8] @64 | m[8] @192 | nibbles @320: load 8p + i
//         low = sub-block 2p k-group i, high = sub-block 2p + 1 k-group i              2368
//   Q5_K  as Q4_K with masks (load 8p + i: low, high) @320 and nibbles @832            2880
//   Q6_K  d @0 | sc[16] (int8) @32 | nibbles @288: load i low = k-group i, high =
//         k-group 32 + i | top bits @2336: load t, bits 2c, 2c + 1 = k-group t + 16c  3360
//   IQ4_NL as Q4_0 (the nibbles index kIq4nlValues)                                  288
//   Q2_K  d @0 | dmin @32 | sc | m << 4 [16] @64 | crumbs @320: load i crumb c =
//         k-group 32·(i / 8) + 8c + i % 8 (ggml's qs bytes as they are)               1344
//   Q3_K  d @0 | sc[16] (int8, s − 32) @32 | crumbs @288 (as Q2_K) | masks @1312:
//         load i crumb c @ 8·(4i + c)                                                 1824
//   IQ4_XS d @0 | sc[8] (int8, l − 32) @32 | nibbles @160: load 4s + i low =
//          sub-block s k-group i, high = its k-group 4 + i                            2208
// (k-groups numbered within the block; Q4_K sub-block s = k-groups 8s … 8s + 7.)
//
// Arithmetic: identical on every ISA, so each output's bits depend only on its two rows (not
// on M, the tile, the thread count or the ISA). Quants enter as unsigned u (q + z: z = 8 for
// Q4_0, 16 for Q5_0, 32 for Q6_K, 4 for Q3_K, 0 for the types with a min; Q8_0 and the IQ4
// types' table values signed), activations as
// int8 rows quantized once per call (activations.h: ActBlock32, Q8_K). Per output and block b:
//   T_b  the exact integer Σ_k q_k·a_k (K-quants and IQ4_XS: Σ_s sc_s · Σ_{k∈s} q_k·a_k;
//        Q2_K / Q4_K / Q5_K also M_b = Σ_s m_s · (a's sum over sub-block s)),
//   acc = acc + float(T_b) · (d_b · d_a)                    (multiply, then add)
//   Q4_1 / Q5_1: off = off + (m_b · d_a) · float(Σ a);      result acc + off
//   Q2_K / Q4_K / Q5_K: mins = mins + float(M_b) · (dmin_b · d_a); result acc − mins
// in block order, one chain per output.

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/cpu_features.h"
#include "kernels/huge_page_memory.h"
#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels::quant {

inline constexpr int kGroupRows = 16;

// Whether `type` computes through this layout (the quantized weight types).
bool interleaved(QuantType type);
// Bytes of one tile (16 rows × one block) of `type`.
std::size_t tile_bytes(QuantType type);

// `rows` rows of ggml blocks (row_bytes apart, `cols` values each) in the layout above.
// `consumed`, when set, is called (from any thread) with each stretch of rows already copied.
// The result holds ceil(rows / 16) · (cols / block) tiles.
HugePageMemory repack(QuantType type, const uint8_t* data, std::size_t row_bytes, int rows, int cols,
                      const std::function<void(const void*, std::size_t)>& consumed = {});

// One group's 16 outputs for `na` activation rows (1 … GroupKernels::max_acts, at
// act + j·act_stride): out[16·j + r] for row r of the group, `blocks` tiles long. `streaming`
// says the tiles come from memory on this pass (the first over the group), so the kernel
// prefetches ahead; later passes of a GEMM find them in cache.
using GroupFn = void (*)(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t act_stride, int na,
                         bool streaming, float* out);

struct GroupKernels {
  GroupFn q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, q2_k, q3_k, iq4_nl, iq4_xs;
  int max_acts;  // activation rows one call takes (what the ISA's registers hold)
};
extern const GroupKernels group_portable, group_avx2, group_avx512, group_avx512vnni;

// The kernels for `isa` (AVX-512 uses VNNI when the CPU has it).
const GroupKernels& group_kernels(Isa isa);
GroupFn group_for(const GroupKernels& kernels, QuantType type);

}  // namespace pagoda::kernels::quant
