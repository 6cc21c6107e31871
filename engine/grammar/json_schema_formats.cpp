// Formats as fixed expressions. Years are 0001-9999 (what datetime.date accepts); February
// 29 needs a year divisible by 4 and, for a century, by 400.

#include "engine/grammar/json_schema_formats.h"

namespace pagoda::grammar {
namespace {

constexpr const char* kYear = R"(([1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))))";
constexpr const char* kLeapYear =
    R"(([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00"))";
constexpr const char* kMonthDay =
    R"((("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))";
constexpr const char* kTime =
    R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+\-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
constexpr const char* kHex = "[0-9a-f]";

std::string date() { return std::string("(") + kYear + " \"-\" " + kMonthDay + " | " + kLeapYear + " \"-02-29\")"; }

}  // namespace

std::string string_format_gbnf(std::string_view format) {
  if (format == "date") return date();
  if (format == "time") return std::string("(") + kTime + ")";
  if (format == "date-time") return date() + " \"T\" " + kTime;
  if (format == "uuid") {
    const std::string h = kHex;
    return h + "{8} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{12}";
  }
  if (format == "email") return R"([A-Za-z0-9._+\-]{1,64} "@" [A-Za-z0-9\-]{1,63} ("." [A-Za-z0-9\-]{1,63}){1,4})";
  if (format == "ipv4") {
    const std::string octet = R"(([0-9] | [1-9] [0-9] | "1" [0-9]{2} | "2" [0-4] [0-9] | "25" [0-5]))";
    return octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet;
  }
  return "";
}

}  // namespace pagoda::grammar
