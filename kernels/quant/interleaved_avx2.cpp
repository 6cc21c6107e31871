// interleaved.h's kernels on 256-bit vectors, each 16-row lane set held in two registers.

#include "kernels/quant/interleaved_x86_kernels.h"

namespace pagoda::kernels::quant {

extern const GroupKernels group_avx2 = make_group_kernels<Lanes256x2>();

}  // namespace pagoda::kernels::quant
