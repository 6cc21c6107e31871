// AVX-512 attention primitives: attention_x86.h's on 16 lanes, up to four query heads at a time.

#include "kernels/attention_x86.h"

namespace pagoda::kernels::detail {

namespace {

struct Avx512Shape {
  using Lanes = Avx512Lanes;
  static constexpr int kHeadsAtOnce = 4;
  // Scores take positions in fours: each query chunk loaded once for four positions.
  static constexpr int score_positions(int heads) { return 4; }
};

}  // namespace

extern const AttentionKernels attention_avx512 = attention_kernels_of<FusedHeadsAttention<Avx512Shape>>();

}  // namespace pagoda::kernels::detail
