#include "kernels/quant/ggml_blocks.h"

namespace pagoda::kernels {

const char* ggml_type_id_name(uint32_t id) {
  // ggml's numbering; 4, 5 and 31–33, 36–38 were types ggml has since removed.
  static constexpr const char* kNames[] = {
      "F32",      "F16",      "Q4_0",    "Q4_1",  "Q4_2",       "Q4_3",       "Q5_0",       "Q5_1",
      "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",  "Q4_K",       "Q5_K",       "Q6_K",       "Q8_K",
      "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL",     "IQ3_S",      "IQ2_S",      "IQ4_XS",
      "I8",       "I16",      "I32",     "I64",   "F64",        "IQ1_M",      "BF16",       "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return id < sizeof(kNames) / sizeof(kNames[0]) ? kNames[id] : nullptr;
}

}  // namespace pagoda::kernels
