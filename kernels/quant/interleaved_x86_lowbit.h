#pragma once
// Internal, for interleaved_x86_kernels.h only: interleaved.h's kernels for Q2_K, Q3_K and
// IQ4_XS over interleaved_x86.h's lanes, with the same exact integer totals and float steps as
// interleaved_portable.cpp (IQ4_NL is interleaved_x86.h's block32). IQ4_XS's table values are
// signed, so they take Q8_0's signed route (dot_q8, less kQ8Bias · Σa per scale group).

#include "kernels/quant/interleaved_x86.h"

namespace pagoda::kernels::quant {
namespace {

// Q2_K, Q3_K (kThree): per half h and quarter q, crumb loads 8h + 4q … 8h + 4q + 3 carry
// sub-blocks 8h + 2c + q in their crumbs c.
template <typename L, int NA, bool kThree>
void k23(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  constexpr std::size_t kTile = kThree ? 1824 : 1344, kCrumbs = kThree ? 288 : 320, kMasks = 1312;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, kTile, true>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F* mins) {
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
        for (int s = 0; s < 16; ++s) m = L::add(m, L::mul(L::high4_32(L::widen_u8(t + 64 + 16 * s)), L::set1(a.bsums[s])));
        mins[j] = add_block<L>(mins[j], m, L::halves(t + 32), a.d);
      }
    }
  }, [](F acc, F mins) { return kThree ? acc : L::fsub(acc, mins); });
}

template <typename L, int NA>
void iq4_xs(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, bool streaming, float* out) {
  using I = typename L::I;
  using F = typename L::F;
  const Acts<L, NA> y(act, stride);
  over_tiles<L, NA, 2208, true>(tiles, blocks, streaming, out, [&](const uint8_t* t, int b, F* acc, F*) {
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
        const I exact = L::kQ8Bias ? L::sub(sum[j], L::set1(L::kQ8Bias * (a.bsums[2 * s] + a.bsums[2 * s + 1]))) : sum[j];
        total[j] = L::add(total[j], L::mul(exact, sc));
      }
    }
    const F d = L::halves(t);
    #pragma GCC unroll 4
    for (int j = 0; j < NA; ++j) acc[j] = add_block<L>(acc[j], total[j], d, y.bk(j, b).d);
  }, acc_only<L>);
}

}  // namespace
}  // namespace pagoda::kernels::quant
