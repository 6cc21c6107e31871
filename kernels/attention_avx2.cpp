// AVX2 attention primitives: attention_x86.h's on 8 lanes, two query heads at a time (their
// chains fill AVX2's sixteen registers).

#include "kernels/attention_x86.h"

namespace pagoda::kernels::detail {

namespace {

struct Avx2Shape {
  using Lanes = Avx2Lanes;
  static constexpr int kHeadsAtOnce = 2;
  // One head's scores take all 8 positions in one pass (8 chains); two heads take 4 a pass.
  static constexpr int score_positions(int heads) { return heads == 1 ? 8 : 4; }
};

}  // namespace

extern const AttentionKernels attention_avx2 = attention_kernels_of<FusedHeadsAttention<Avx2Shape>>();

}  // namespace pagoda::kernels::detail
