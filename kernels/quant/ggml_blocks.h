#pragma once
// ggml's quantized block layouts, byte for byte as GGUF files store them (a fact of the file
// format: llama.cpp's llama-quantize writes these and pagoda reads them straight from the
// mapping). Every struct is packed and little-endian; f16 fields are IEEE half bits.
//
// Types with 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, and Q8_1 for activations)
// hold one scale per block; the K-quants (Q2_K … Q6_K, IQ4_XS, and Q8_K for activations) group
// 256 elements into a super-block with per-sub-block scales. IQ4_NL and IQ4_XS map their 4-bit
// quants through the non-linear table kIq4nlValues instead of a linear grid.

#include <cstddef>
#include <cstdint>

namespace pagoda::kernels {

// ggml's type ids, as GGUF stores them. Only the ones pagoda reads or computes with are
// listed; any other id is refused by name (see ggml_type_id_name).
enum class QuantType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,  // activations only
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,  // activations only
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

inline constexpr int kQK = 32;          // elements of a Q4_0 … Q8_1 block
inline constexpr int kQK_K = 256;       // elements of a K-quant super-block
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales and mins of Q4_K and Q5_K

#pragma pack(push, 1)
// value = d · (q − 8), q the 4-bit quant; element j in the low nibble of qs[j], j + 16 in the high.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// value = d · q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// value = d · (q − 16), q = 4 low bits from qs (as Q4_0) | bit j of qh (little-endian u32) << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// value = d · q + m, q as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// value = d · q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// value = d · q; s = d · Σq (kept for the Q4_1/Q5_1 dot products).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
// value = d · kIq4nlValues[q], q as Q4_0's nibbles.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// 16 sub-blocks of 16: value = d · (scales[j] & 15) · q − dmin · (scales[j] >> 4), q 2 bits.
// Each half of 128 values owns 32 bytes of qs: element 32c + l (l < 32) of the half is bits
// 2c, 2c + 1 of the half's byte l; sub-block j = 8·half + 2c + l / 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16: value = d · (s_j − 32) · (q − 4), q 3 bits: the low 2 as Q2_K's qs, the
// third bit of element 128·half + 32c + l from bit 4·half + c of hmask[l]. The 6-bit s_j: low
// nibble of scales[j] (j < 8) or high nibble of scales[j − 8], and bits 2·(j / 4), +1 of
// scales[8 + j % 4] on top (q3_k_scale).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 as IQ4_NL's, scaled by d · (l_j − 32): l_j is the nibble j % 2 of
// scales_l[j / 2] with bits 2j, 2j + 1 of scales_h on top.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
// 8 sub-blocks of 32: value = d · sc_j · q − dmin · m_j, with 6-bit sc_j and m_j packed in
// `scales` (j < 4: low 6 bits of scales[j] and scales[j + 4]; j ≥ 4: low nibble of
// scales[j + 4] | top 2 bits of scales[j − 4] << 4, and the high nibble | top bits of
// scales[j] for m). qs holds 4-bit q: each 32 bytes carry two sub-blocks, low nibbles first.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a fifth bit per element from qh: bit (2·pair + high) of qh[l] for element l of
// the pair's sub-blocks.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: value = d · scales[j] · (q − 32), q 6 bits: 4 low bits in ql, 2 high in qh.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activations for K-quant dot products: value = d · q (d a float); bsums[j] = Σ of the 16 q
// of group j.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_XS) == 136);

// IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl): denser near 0, as normally
// distributed weights are.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q3_K sub-block j's 6-bit scale, 0 … 63 (layout above; the value used is this − 32).
inline int q3_k_scale(int j, const uint8_t* scales) {
  const int low = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4;
  return low | ((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}
// IQ4_XS sub-block j's 6-bit scale, 0 … 63 (the value used is this − 32).
inline int iq4_xs_scale(int j, uint16_t scales_h, const uint8_t* scales_l) {
  return ((scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((scales_h >> (2 * j)) & 3) << 4;
}

// Sub-block j's 6-bit scale and min from a Q4_K / Q5_K `scales` array (layout above).
inline void k_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = uint8_t((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    *min = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Elements and bytes of one block of `type` (1 and the element size for F32, F16, BF16).
struct BlockShape {
  int elements;
  int bytes;
};
constexpr BlockShape block_shape(QuantType type) {
  switch (type) {
    case QuantType::F32: return {1, 4};
    case QuantType::F16: return {1, 2};
    case QuantType::BF16: return {1, 2};
    case QuantType::Q4_0: return {kQK, sizeof(BlockQ4_0)};
    case QuantType::Q4_1: return {kQK, sizeof(BlockQ4_1)};
    case QuantType::Q5_0: return {kQK, sizeof(BlockQ5_0)};
    case QuantType::Q5_1: return {kQK, sizeof(BlockQ5_1)};
    case QuantType::Q8_0: return {kQK, sizeof(BlockQ8_0)};
    case QuantType::Q8_1: return {kQK, sizeof(BlockQ8_1)};
    case QuantType::IQ4_NL: return {kQK, sizeof(BlockIQ4_NL)};
    case QuantType::Q2_K: return {kQK_K, sizeof(BlockQ2_K)};
    case QuantType::Q3_K: return {kQK_K, sizeof(BlockQ3_K)};
    case QuantType::IQ4_XS: return {kQK_K, sizeof(BlockIQ4_XS)};
    case QuantType::Q4_K: return {kQK_K, sizeof(BlockQ4_K)};
    case QuantType::Q5_K: return {kQK_K, sizeof(BlockQ5_K)};
    case QuantType::Q6_K: return {kQK_K, sizeof(BlockQ6_K)};
    case QuantType::Q8_K: return {kQK_K, sizeof(BlockQ8_K)};
  }
  return {0, 0};
}

// ggml's name of any type id ("Q4_K", "IQ2_XXS", …), or nullptr for an id ggml never used, so
// a refusal can name what the file holds.
const char* ggml_type_id_name(uint32_t id);

}  // namespace pagoda::kernels
