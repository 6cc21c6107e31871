#pragma once
// JSON numbers within bounds as GBNF, for engine/grammar/json_schema: integers exactly (the
// digit strings of a range split by length and then by leading digits, as llama.cpp does),
// other numbers at integer granularity (see number_range_gbnf).

#include <cstdint>
#include <string>

namespace pagoda::grammar {

// Magnitudes beyond this are never generated; bounds past it are the same as none.
inline constexpr int64_t kMaxIntegerMagnitude = 999'999'999'999'999'999;  // 18 digits
// Integers with no bound on a side go up to 16 digits there.
inline constexpr int64_t kUnboundedIntegerMagnitude = 9'999'999'999'999'999;

// GBNF alternatives matching exactly the decimal integers in [lo, hi] (no leading zeros, no
// "-0"). Requires -kMaxIntegerMagnitude <= lo <= hi <= kMaxIntegerMagnitude.
std::string integer_range_gbnf(int64_t lo, int64_t hi);

// GBNF alternatives for numbers between lo and hi (either may be infinite), written without
// an exponent: the integers in range, and an integer part with a fraction of 1 to 6 digits
// (the last not 0) only when the whole open unit interval it lies in is within the bounds
// and the integer part is below 10^9, so that parsing the text as a double cannot round it
// onto a bound. Empty when that leaves nothing.
std::string number_range_gbnf(double lo, bool lo_exclusive, double hi, bool hi_exclusive);

}  // namespace pagoda::grammar
