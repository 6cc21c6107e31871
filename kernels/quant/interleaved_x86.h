#pragma once
// Internal, for interleaved_x86_kernels.h only: interleaved.h's kernels written once over the
// lanes of interleaved_x86_lanes.h, with the same exact integer totals and float steps as
// interleaved_portable.cpp. The IQ4 types' table values are signed, so they take Q8_0's signed
// route (dot_q8, less kQ8Bias · Σa per scale group).

#include "kernels/quant/interleaved_x86_lanes.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/activations.h"

namespace pagoda::kernels::quant {
namespace {

// Decode streams tiles faster than the hardware prefetcher, which stops at each 4 KiB page,
// keeps up with: on a streaming pass each block asks for the tile about kPrefetchBytes further
// on (past a group's end, the next group's, which decode's static split gives the same
// thread). A prefetch beyond the matrix never faults. Into L2, not L1: a tile's burst of
// 35–53 line requests fills L1's few miss buffers and stalls the kernel's own loads behind
// them (streaming GEMV on Zen 4: Q6_K 14 → 28 GB/s, Q4_K 24 → 44 GB/s, Q8_0 25 → 30 GB/s).
constexpr std::size_t kPrefetchBytes = 4096;
template <std::size_t kTile>
inline const uint8_t* tile_ahead(const uint8_t* tile) {
  return tile + (kPrefetchBytes + kTile - 1) / kTile * kTile;
}
template <std::size_t kTile>
inline void prefetch_ahead(const uint8_t* tile) {
  const uint8_t* ahead = tile_ahead<kTile>(tile);
  for (std::size_t offset = 0; offset < kTile; offset += 64)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + offset), _MM_HINT_T1);
}
// Part `part` of `parts` of that prefetch, for a kernel that spreads it over its steps. Measured
// on Llama-3.2-1B's matrices (bench_decode_profile): Q6_K's tile, the largest, streams ~10%
// faster spread over its 16 steps; Q4_K's streamed ~10% slower spread, so it keeps the burst.
template <std::size_t kTile>
inline void prefetch_ahead_part(const uint8_t* tile, int part, int parts) {
  const uint8_t* ahead = tile_ahead<kTile>(tile);
  constexpr std::size_t kLines = (kTile + 63) / 64;
  for (std::size_t l = kLines * part / parts; l < kLines * (part + 1) / parts; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T1);
}

template <typename L, int NA>
struct Acts {
  const uint8_t* rows[NA];
  Acts(const uint8_t* act, std::size_t stride) {
    for (int j = 0; j < NA; ++j) rows[j] = act + stride * j;
  }
  const ActBlock32& b32(int j, int b) const { return reinterpret_cast<const ActBlock32*>(rows[j])[b]; }
  const BlockQ8_K& bk(int j, int b) const { return reinterpret_cast<const BlockQ8_K*>(rows[j])[b]; }
};

// acc + float(total) · (d · d_a).
template <typename L>
inline typename L::F add_block(typename L::F acc, typename L::I total, typename L::F d, float da) {
  return L::fadd(acc, L::fmul(L::to_float(total), L::fmul(d, L::fset1(da))));
}

// The pass every kernel makes over a group's tiles: NA float accumulators, and NA more for the
// types with a second series (Q4_1 / Q5_1's offsets, the K-quants' mins; compiled away where
// unused), all zero to start; for each block b its tile t, prefetched ahead on a streaming pass
// (kPrefetch: unless the kernel spreads the prefetch over its steps itself), and
// block(t, b, acc, more); then out[16·j + r] = result(acc[j], more[j]).
template <typename L, int NA, std::size_t kTile, bool kPrefetch, typename Block, typename Result>
[[gnu::always_inline]] inline void over_tiles(const uint8_t* tiles, int blocks, bool streaming, float* out,
                                              Block&& block, Result&& result) {
  typename L::F acc[NA], more[NA];
  for (int j = 0; j < NA; ++j) acc[j] = more[j] = L::fzero();
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* t = tiles + kTile * std::size_t(b);
    if (kPrefetch && streaming) prefetch_ahead<kTile>(t);
    block(t, b, acc, more);
  }
  for (int j = 0; j < NA; ++j) L::store(out + kGroupRows * j, result(acc[j], more[j]));
}

// The result of the types with one series.
template <typename L>
inline typename L::F acc_only(typename L::F acc, typename L::F) {
  return acc;
}

template <typename L, int NA>
void q8_0(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 544, true>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F*) {
        I sum[NA];
        for (I& s : sum) s = L::zero();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const I q = L::prepare_q8(L::load(t + 32 + 64 * g));
#pragma GCC unroll 4
          for (int j = 0; j < NA; ++j) sum[j] = L::dot_q8(sum[j], q, L::broadcast(y.b32(j, b).qs + 4 * g));
        }
        const F d = L::halves(t);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const ActBlock32& a = y.b32(j, b);
          const I total = L::kQ8Bias ? L::sub(sum[j], L::set1(L::kQ8Bias * a.sum)) : sum[j];
          acc[j] = add_block<L>(acc[j], total, d, a.d);
        }
      },
      acc_only<L>);
}

// Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (Q4_0's tile; its nibbles index kIq4nlValues, signed, so
// they take Q8_0's route: dot_q8, less kQ8Bias·Σa).
template <typename L, int NA, QuantType kType>
void block32(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr bool kMin = kType == QuantType::Q4_1 || kType == QuantType::Q5_1;
  constexpr bool kFive = kType == QuantType::Q5_0 || kType == QuantType::Q5_1;
  constexpr bool kTable = kType == QuantType::IQ4_NL;
  constexpr int kOffset = kTable ? L::kQ8Bias : kMin ? 0 : kFive ? 16 : 8;
  constexpr std::size_t kMasks = kMin ? 64 : 32, kNibbles = kMasks + (kFive ? 64 : 0);
  constexpr std::size_t kTile = kNibbles + 256;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F* off) {
        I sum[NA];
        for (I& s : sum) s = L::zero();
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          const I v = L::load(t + kNibbles + 64 * i);
          I lo = L::low4(v), hi = L::high4(v);
          if constexpr (kFive) {
            lo = L::fifth(lo, t + kMasks + 16 * i);
            hi = L::fifth(hi, t + kMasks + 16 * i + 8);
          }
          if constexpr (kTable) {
            lo = L::prepare_q8(L::iq4nl(lo));
            hi = L::prepare_q8(L::iq4nl(hi));
          }
#pragma GCC unroll 4
          for (int j = 0; j < NA; ++j) {
            if constexpr (kTable) {
              sum[j] = L::dot_q8(sum[j], lo, L::broadcast(y.b32(j, b).qs + 4 * i));
              sum[j] = L::dot_q8(sum[j], hi, L::broadcast(y.b32(j, b).qs + 16 + 4 * i));
            } else {
              sum[j] = L::dot(sum[j], lo, L::broadcast(y.b32(j, b).qs + 4 * i));
              sum[j] = L::dot(sum[j], hi, L::broadcast(y.b32(j, b).qs + 16 + 4 * i));
            }
          }
        }
        const F d = L::halves(t);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const ActBlock32& a = y.b32(j, b);
          const I total = kOffset ? L::sub(sum[j], L::set1(kOffset * a.sum)) : sum[j];
          acc[j] = add_block<L>(acc[j], total, d, a.d);
          if constexpr (kMin)
            off[j] = L::fadd(off[j], L::fmul(L::fmul(L::halves(t + 32), L::fset1(a.d)), L::fset1(float(a.sum))));
        }
      },
      [](F acc, F off) { return kMin ? L::fadd(acc, off) : acc; });
}

// Q4_K, Q5_K.
template <typename L, int NA, bool kFive>
void k45(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr std::size_t kNibbles = kFive ? 832 : 320, kTile = kFive ? 2880 : 2368;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F* mins) {
        I total[NA];
        for (I& s : total) s = L::zero();
        for (int p = 0; p < 4; ++p) {
          I lo_sum[NA], hi_sum[NA];
          for (int j = 0; j < NA; ++j) lo_sum[j] = hi_sum[j] = L::zero();
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) {
            const int load = 8 * p + i;
            const I v = L::load(t + kNibbles + 64 * load);
            I lo = L::low4(v), hi = L::high4(v);
            if constexpr (kFive) {
              lo = L::fifth(lo, t + 320 + 16 * load);
              hi = L::fifth(hi, t + 320 + 16 * load + 8);
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
              const int8_t* a = y.bk(j, b).qs + 64 * p + 4 * i;
              lo_sum[j] = L::dot(lo_sum[j], lo, L::broadcast(a));
              hi_sum[j] = L::dot(hi_sum[j], hi, L::broadcast(a + 32));
            }
          }
          const I sc_lo = L::widen_u8(t + 64 + 16 * (2 * p)), sc_hi = L::widen_u8(t + 64 + 16 * (2 * p + 1));
#pragma GCC unroll 4
          for (int j = 0; j < NA; ++j)
            total[j] = L::add(total[j], L::add(L::mul(lo_sum[j], sc_lo), L::mul(hi_sum[j], sc_hi)));
        }
        const F d = L::halves(t), dmin = L::halves(t + 32);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const BlockQ8_K& a = y.bk(j, b);
          I m = L::zero();
          for (int s = 0; s < 8; ++s)
            m = L::add(m, L::mul(L::widen_u8(t + 192 + 16 * s), L::set1(a.bsums[2 * s] + a.bsums[2 * s + 1])));
          acc[j] = add_block<L>(acc[j], total[j], d, a.d);
          mins[j] = add_block<L>(mins[j], m, dmin, a.d);
        }
      },
      [](F acc, F mins) { return L::fsub(acc, mins); });
}

// Q6_K spreads its prefetch over its 16 steps.
template <typename L, int NA>
void q6_k(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 3360, false>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F*) {
        I total[NA];
        for (I& s : total) s = L::zero();
        for (int s0 = 0; s0 < 4; ++s0) {  // sub-blocks s0 + 4c: k-groups t + 16c for t in 4·s0 … 4·s0 + 3
          I sum[4][NA];
          for (auto& c : sum)
            for (I& s : c) s = L::zero();
#pragma GCC unroll 4
          for (int tl = 4 * s0; tl < 4 * s0 + 4; ++tl) {
            if (streaming) prefetch_ahead_part<3360>(t, tl, 16);
            const I top = L::load(t + 2336 + 64 * tl);
            const I n0 = L::load(t + 288 + 64 * tl), n1 = L::load(t + 288 + 64 * (tl + 16));
            const I q[4] = {L::or_(L::low4(n0), L::top2(top, 0)), L::or_(L::low4(n1), L::top2(top, 2)),
                            L::or_(L::high4(n0), L::top2(top, 4)), L::or_(L::high4(n1), L::top2(top, 6))};
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
              const int8_t* a = y.bk(j, b).qs;
#pragma GCC unroll 4
              for (int c = 0; c < 4; ++c) sum[c][j] = L::dot(sum[c][j], q[c], L::broadcast(a + 4 * (tl + 16 * c)));
            }
          }
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const int s = s0 + 4 * c;
            const I sc = L::widen_s8(t + 32 + 16 * s);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j)
              total[j] = L::add(total[j], L::mul(L::sub(sum[c][j], L::set1(32 * y.bk(j, b).bsums[s])), sc));
          }
        }
        const F d = L::halves(t);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) acc[j] = add_block<L>(acc[j], total[j], d, y.bk(j, b).d);
      },
      acc_only<L>);
}

// Q2_K, Q3_K (kThree): per half h and quarter q, crumb loads 8h + 4q … 8h + 4q + 3 carry
// sub-blocks 8h + 2c + q in their crumbs c.
template <typename L, int NA, bool kThree>
void k23(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr std::size_t kTile = kThree ? 1824 : 1344, kCrumbs = kThree ? 288 : 320, kMasks = 1312;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F* mins) {
        I total[NA];
        for (I& s : total) s = L::zero();
        for (int h = 0; h < 2; ++h) {
          for (int q = 0; q < 2; ++q) {
            I sum[4][NA];
            for (auto& c : sum)
              for (I& s : c) s = L::zero();
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) {
              const int load = 8 * h + 4 * q + i;
              const I v = L::load(t + kCrumbs + 64 * load);
#pragma GCC unroll 4
              for (int c = 0; c < 4; ++c) {
                I u = L::crumb(v, 2 * c);
                if constexpr (kThree) u = L::fifth(u, t + kMasks + 8 * (4 * load + c), 4);
#pragma GCC unroll 4
                for (int j = 0; j < NA; ++j)
                  sum[c][j] = L::dot(sum[c][j], u, L::broadcast(y.bk(j, b).qs + 128 * h + 32 * c + 16 * q + 4 * i));
              }
            }
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
              const int s = 8 * h + 2 * c + q;
              if constexpr (kThree) {
                const I sc = L::widen_s8(t + 32 + 16 * s);
                for (int j = 0; j < NA; ++j)
                  total[j] = L::add(total[j], L::mul(L::sub(sum[c][j], L::set1(4 * y.bk(j, b).bsums[s])), sc));
              } else {
                const I sc = L::low4_32(L::widen_u8(t + 64 + 16 * s));
                for (int j = 0; j < NA; ++j) total[j] = L::add(total[j], L::mul(sum[c][j], sc));
              }
            }
          }
        }
        const F d = L::halves(t);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) {
          const BlockQ8_K& a = y.bk(j, b);
          acc[j] = add_block<L>(acc[j], total[j], d, a.d);
          if constexpr (!kThree) {
            I m = L::zero();
            for (int s = 0; s < 16; ++s)
              m = L::add(m, L::mul(L::high4_32(L::widen_u8(t + 64 + 16 * s)), L::set1(a.bsums[s])));
            mins[j] = add_block<L>(mins[j], m, L::halves(t + 32), a.d);
          }
        }
      },
      [](F acc, F mins) { return kThree ? acc : L::fsub(acc, mins); });
}

template <typename L, int NA>
void iq4_xs(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 2208, true>(
      tiles, blocks, streaming, out,
      [&](const uint8_t* t, int b, F* acc, F*) {
        I total[NA];
        for (I& s : total) s = L::zero();
        for (int s = 0; s < 8; ++s) {
          I sum[NA];
          for (I& x : sum) x = L::zero();
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            const I v = L::load(t + 160 + 64 * (4 * s + i));
            const I lo = L::prepare_q8(L::iq4nl(L::low4(v))), hi = L::prepare_q8(L::iq4nl(L::high4(v)));
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
              const int8_t* a = y.bk(j, b).qs + 32 * s + 4 * i;
              sum[j] = L::dot_q8(sum[j], lo, L::broadcast(a));
              sum[j] = L::dot_q8(sum[j], hi, L::broadcast(a + 16));
            }
          }
          const I sc = L::widen_s8(t + 32 + 16 * s);
#pragma GCC unroll 4
          for (int j = 0; j < NA; ++j) {
            const BlockQ8_K& a = y.bk(j, b);
            const I exact =
                L::kQ8Bias ? L::sub(sum[j], L::set1(L::kQ8Bias * (a.bsums[2 * s] + a.bsums[2 * s + 1]))) : sum[j];
            total[j] = L::add(total[j], L::mul(exact, sc));
          }
        }
        const F d = L::halves(t);
#pragma GCC unroll 4
        for (int j = 0; j < NA; ++j) acc[j] = add_block<L>(acc[j], total[j], d, y.bk(j, b).d);
      },
      acc_only<L>);
}

}  // namespace
}  // namespace pagoda::kernels::quant
