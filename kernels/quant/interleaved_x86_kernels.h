#pragma once
// Internal, for interleaved_avx2.cpp / _avx512.cpp / _avx512vnni.cpp only: the GroupKernels
// table of one lane type, over the kernels of interleaved_x86.h.

#include "kernels/quant/interleaved_x86.h"

namespace pagoda::kernels::quant {
namespace {

// A GroupFn taking 1 … L::kMaxActs activation rows.
template <typename L, template <typename, int> class Kernel>
void by_acts(const uint8_t* tiles, int blocks, const uint8_t* act, std::size_t stride, int na, bool streaming,
             float* out) {
  switch (na) {
    case 1: Kernel<L, 1>::run(tiles, blocks, act, stride, streaming, out); break;
    case 2: Kernel<L, 2>::run(tiles, blocks, act, stride, streaming, out); break;
    case 3:
      if constexpr (L::kMaxActs >= 3) Kernel<L, 3>::run(tiles, blocks, act, stride, streaming, out);
      break;
    case 4:
      if constexpr (L::kMaxActs >= 4) Kernel<L, 4>::run(tiles, blocks, act, stride, streaming, out);
      break;
    default: break;
  }
}

template <typename L, int NA>
struct Q8_0K {
  static constexpr auto run = q8_0<L, NA>;
};
template <typename L, int NA>
struct Q4_0K {
  static constexpr auto run = block32<L, NA, QuantType::Q4_0>;
};
template <typename L, int NA>
struct Q4_1K {
  static constexpr auto run = block32<L, NA, QuantType::Q4_1>;
};
template <typename L, int NA>
struct Q5_0K {
  static constexpr auto run = block32<L, NA, QuantType::Q5_0>;
};
template <typename L, int NA>
struct Q5_1K {
  static constexpr auto run = block32<L, NA, QuantType::Q5_1>;
};
template <typename L, int NA>
struct Q4_KK {
  static constexpr auto run = k45<L, NA, false>;
};
template <typename L, int NA>
struct Q5_KK {
  static constexpr auto run = k45<L, NA, true>;
};
template <typename L, int NA>
struct Q6_KK {
  static constexpr auto run = q6_k<L, NA>;
};
template <typename L, int NA>
struct Q2_KK {
  static constexpr auto run = k23<L, NA, false>;
};
template <typename L, int NA>
struct Q3_KK {
  static constexpr auto run = k23<L, NA, true>;
};
template <typename L, int NA>
struct IQ4_NLK {
  static constexpr auto run = block32<L, NA, QuantType::IQ4_NL>;
};
template <typename L, int NA>
struct IQ4_XSK {
  static constexpr auto run = iq4_xs<L, NA>;
};

template <typename L>
constexpr GroupKernels make_group_kernels() {
  return {by_acts<L, Q4_0K>,   by_acts<L, Q4_1K>,   by_acts<L, Q5_0K>, by_acts<L, Q5_1K>, by_acts<L, Q8_0K>,
          by_acts<L, Q4_KK>,   by_acts<L, Q5_KK>,   by_acts<L, Q6_KK>, by_acts<L, Q2_KK>, by_acts<L, Q3_KK>,
          by_acts<L, IQ4_NLK>, by_acts<L, IQ4_XSK>, L::kMaxActs};
}

}  // namespace
}  // namespace pagoda::kernels::quant
