// interleaved.h's kernels on 512-bit vectors with VNNI's vpdpbusd.

#include "kernels/quant/interleaved_x86_kernels.h"

namespace pagoda::kernels::quant {

extern const GroupKernels group_avx512vnni = make_group_kernels<Lanes512<true>>();

}  // namespace pagoda::kernels::quant
