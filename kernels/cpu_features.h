#pragma once
// Which SIMD instruction set the kernels run on. Detected once from the CPU, overridable with
// the PAGODA_ISA environment variable (portable|avx2|avx512) and, for tests, with set_isa().

namespace pagoda::kernels {

enum class Isa { Portable, Avx2, Avx512 };

inline constexpr int kIsaCount = 3;

const char* isa_name(Isa isa);

// True when this CPU can run `isa` (AVX-512 needs F+BW+VL+DQ; AVX2 needs AVX2+FMA).
bool cpu_supports(Isa isa);

// The best ISA this CPU supports.
Isa detected_isa();

// The ISA the kernels use now: PAGODA_ISA if set and supported (an unsupported or unknown
// value is reported on stderr and ignored), else detected_isa().
Isa active_isa();

// Switches every kernel table to `isa`; returns false and changes nothing if the CPU lacks it.
// Calls already running finish on the table they started with; matrices packed earlier keep
// their ISA (see PackedMatrix).
bool set_isa(Isa isa);

}  // namespace pagoda::kernels
