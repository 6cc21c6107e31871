#include "kernels/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>

#include "kernels/dispatch.h"

namespace pagoda::kernels {

const char* isa_name(Isa isa) {
  static constexpr const char* kNames[] = {"portable", "avx2", "avx512"};  // in Isa's order
  static_assert(std::size(kNames) == kIsaCount);
  return unsigned(isa) < unsigned(kIsaCount) ? kNames[unsigned(isa)] : "unknown";
}

bool cpu_supports(Isa isa) {
  __builtin_cpu_init();  // idempotent; needed if this runs before the library's constructors
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && cpu_supports(Isa::Avx2);
  }
  return false;
}

Isa detected_isa() {
  if (cpu_supports(Isa::Avx512)) return Isa::Avx512;
  if (cpu_supports(Isa::Avx2)) return Isa::Avx2;
  return Isa::Portable;
}

namespace {

Isa isa_from_environment() {
  const char* value = std::getenv("PAGODA_ISA");
  if (value == nullptr || *value == '\0') return detected_isa();
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    if (std::strcmp(value, isa_name(isa)) != 0) continue;
    if (cpu_supports(isa)) return isa;
    std::fprintf(stderr, "pagoda: PAGODA_ISA=%s but this CPU lacks it; using %s\n", value, isa_name(detected_isa()));
    return detected_isa();
  }
  std::fprintf(stderr, "pagoda: unknown PAGODA_ISA=%s (portable|avx2|avx512); using %s\n", value,
               isa_name(detected_isa()));
  return detected_isa();
}

}  // namespace

Isa active_isa() { return detail::active_table().isa; }

bool set_isa(Isa isa) {
  if (!cpu_supports(isa)) return false;
  detail::activate(isa);
  return true;
}

namespace detail {

Isa initial_isa() {
  static const Isa isa = isa_from_environment();
  return isa;
}

}  // namespace detail

}  // namespace pagoda::kernels
