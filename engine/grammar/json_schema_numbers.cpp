// Decimal ranges as grammars. A range of same-length digit strings [a, b] is: the common
// prefix, then at the first differing position either a's digit followed by [rest of a, 9...9],
// a digit strictly between followed by any digits, or b's digit followed by [0...0, rest of
// b]. The alternatives start with different digits, so the grammar is unambiguous.

#include "engine/grammar/json_schema_numbers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/grammar/gbnf_text.h"

namespace pagoda::grammar {
namespace {

std::string digit_class(char lo, char hi) { return gbnf_class({{char32_t(lo), char32_t(hi)}}); }

std::string any_digits(size_t n) { return gbnf_repeat("[0-9]", n, n); }

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string group(const std::vector<std::string>& alts) {
  return alts.size() == 1 ? alts[0] : "(" + join_alternatives(alts) + ")";
}

// Digit strings of a's length between a and b (a <= b, same length, any leading digits).
std::vector<std::string> same_length_range(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  const std::string prefix = i == 0 ? "" : gbnf_literal(a.substr(0, i)) + " ";
  if (i == a.size()) return {gbnf_literal(a)};
  const size_t rest = a.size() - i - 1;
  if (rest == 0) return {prefix + digit_class(a[i], b[i])};
  const std::string a_rest = a.substr(i + 1), b_rest = b.substr(i + 1);
  const bool a_rest_lowest = a_rest == std::string(rest, '0');
  const bool b_rest_highest = b_rest == std::string(rest, '9');
  std::vector<std::string> alts;
  const char middle_lo = a_rest_lowest ? a[i] : char(a[i] + 1);
  const char middle_hi = b_rest_highest ? b[i] : char(b[i] - 1);
  if (!a_rest_lowest) {
    alts.push_back(prefix + gbnf_literal(std::string(1, a[i])) + " " +
                   group(same_length_range(a_rest, std::string(rest, '9'))));
  }
  if (middle_lo <= middle_hi) alts.push_back(prefix + digit_class(middle_lo, middle_hi) + " " + any_digits(rest));
  if (!b_rest_highest) {
    alts.push_back(prefix + gbnf_literal(std::string(1, b[i])) + " " +
                   group(same_length_range(std::string(rest, '0'), b_rest)));
  }
  return alts;
}

// Non-negative integers in [lo, hi] without leading zeros.
std::vector<std::string> natural_range(int64_t lo, int64_t hi) {
  const std::string lo_s = std::to_string(lo), hi_s = std::to_string(hi);
  std::vector<std::string> alts;
  for (size_t length = lo_s.size(); length <= hi_s.size(); ++length) {
    const bool first = length == lo_s.size(), last = length == hi_s.size();
    if (!first && !last) {
      // Every number of the lengths strictly between: one alternative for all of them.
      const size_t longest = hi_s.size() - 1;
      alts.push_back("[1-9] " + gbnf_repeat("[0-9]", length - 1, longest - 1));
      length = longest;
      continue;
    }
    const std::string a = first ? lo_s : "1" + std::string(length - 1, '0');
    const std::string b = last ? hi_s : std::string(length, '9');
    for (std::string& alt : same_length_range(a, b)) alts.push_back(std::move(alt));
  }
  return alts;
}

// The smallest integer >= x and the largest <= x, clamped to the generated magnitudes.
int64_t clamp_integer(double x) {
  const auto m = double(kMaxIntegerMagnitude);
  return int64_t(std::clamp(x, -m, m));
}

}  // namespace

std::string integer_range_gbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + group(natural_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo)));
  if (hi >= 0) {
    for (std::string& alt : natural_range(std::max<int64_t>(lo, 0), hi)) alts.push_back(std::move(alt));
  }
  return join_alternatives(alts);
}

std::string number_range_gbnf(double lo, bool lo_exclusive, double hi, bool hi_exclusive) {
  constexpr int64_t kFractionMagnitude = 999'999'999;
  const auto unbounded = double(kUnboundedIntegerMagnitude);
  if (std::isinf(lo)) lo = -unbounded;
  if (std::isinf(hi)) hi = unbounded;
  // Integers: the smallest satisfying the lower bound to the largest satisfying the upper.
  const int64_t int_lo = clamp_integer(lo_exclusive ? std::floor(lo) + 1 : std::ceil(lo));
  const int64_t int_hi = clamp_integer(hi_exclusive ? std::ceil(hi) - 1 : std::floor(hi));
  // A fraction after integer part I lies strictly inside (I, I + 1), or (-(I + 1), -I) after
  // a minus sign: allowed when the closed interval's ends satisfy the bounds non-strictly.
  const int64_t ceil_lo = clamp_integer(std::ceil(lo)), floor_hi = clamp_integer(std::floor(hi));
  const int64_t pos_lo = std::max<int64_t>(0, ceil_lo), pos_hi = std::min(kFractionMagnitude, floor_hi - 1);
  const int64_t neg_lo = std::max<int64_t>(0, -floor_hi), neg_hi = std::min(kFractionMagnitude, -ceil_lo - 1);
  const std::string fraction = "\".\" [0-9]{0,5} [1-9]";
  std::vector<std::string> alts;
  if (int_lo <= int_hi) alts.push_back(integer_range_gbnf(int_lo, int_hi));
  if (pos_lo <= pos_hi) alts.push_back(group(natural_range(pos_lo, pos_hi)) + " " + fraction);
  if (neg_lo <= neg_hi) alts.push_back("\"-\" " + group(natural_range(neg_lo, neg_hi)) + " " + fraction);
  return join_alternatives(alts);
}

}  // namespace pagoda::grammar
