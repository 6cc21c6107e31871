#pragma once
// Internal: <immintrin.h> for the *_avx2/_avx512 translation units. GCC 12 warns about the
// deliberately undefined vectors inside its own AVX-512 intrinsics (GCC bug 105593, fixed in
// 13); the warning is silenced for those header lines only.

#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized and no such warning here
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
