// interleaved.h's kernels on 512-bit vectors without VNNI (pmaddubsw + pmaddwd).

#include "kernels/quant/interleaved_x86_kernels.h"

namespace pagoda::kernels::quant {

extern const GroupKernels group_avx512 = make_group_kernels<Lanes512<false>>();

}  // namespace pagoda::kernels::quant
