// The bounded JSON parser (engine/util/json_depth) builds the same values nlohmann's parser
// does, key order and duplicate keys included, and stays linear on one object with a hundred
// thousand keys (nlohmann's own ordered parser scans the object for every key).

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/json_depth.h"
#include "pagoda/error.h"

namespace pagoda {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// An object of `n` keys "k0".."k{n-1}" written in a shuffled order, each key's value its number.
std::string wide_object(size_t n, std::vector<size_t>& order) {
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::string text = "{";
  for (size_t i = 0; i < n; ++i)
    text += (i ? ",\"k" : "\"k") + std::to_string(order[i]) + "\":" + std::to_string(order[i]);
  return text + "}";
}

TEST(JsonBounded, BuildsWhatNlohmannBuildsForEveryKindOfValue) {
  const std::vector<std::string> documents = {
      "null",
      "true",
      "false",
      "0",
      "-7",
      "18446744073709551615",
      "1.5e-3",
      "\"a\\u00e9\\n\"",
      "[]",
      "{}",
      R"({"z":1,"a":[1,{"y":null,"b":[]},"s"],"m":{"q":{"r":{}}}})",
      R"([[[]],{"":0},[{"a":1.25,"b":-0.0}],"\ud83d\ude00"])",
      R"({"dup":1,"x":2,"dup":{"inner":3}})",
  };
  for (const std::string& d : documents) {
    EXPECT_EQ(parse_ordered_json_bounded(d, "x").dump(), ordered_json::parse(d).dump()) << d;
    EXPECT_EQ(parse_json_bounded(d, "x").dump(), json::parse(d).dump()) << d;
  }
}

TEST(JsonBounded, KeepsTheOrderOfAHundredThousandKeysInOneObject) {
  std::vector<size_t> order;
  const ordered_json value = parse_ordered_json_bounded(wide_object(100000, order), "x");
  ASSERT_EQ(value.size(), order.size());
  size_t i = 0;
  for (const auto& [key, v] : value.items()) {
    ASSERT_EQ(key, "k" + std::to_string(order[i])) << i;
    ASSERT_EQ(v.get<size_t>(), order[i]) << i;
    ++i;
  }
  EXPECT_EQ(value.at("k99999").get<size_t>(), 99999u);
}

TEST(JsonBounded, LetsTheLastDuplicateWinAtTheFirstPlaceInSmallAndWideObjects) {
  for (const size_t n : {3, 16, 17, 40, 5000}) {
    std::vector<size_t> order;
    std::string text = wide_object(n, order);
    text.pop_back();
    // Every key again with its value doubled, then the first key once more.
    for (size_t k = 0; k < n; ++k) text += ",\"k" + std::to_string(k) + "\":" + std::to_string(2 * k);
    text += ",\"k" + std::to_string(order[0]) + "\":\"last\"}";
    const ordered_json ours = parse_ordered_json_bounded(text, "x");
    EXPECT_EQ(ours.dump(), ordered_json::parse(text).dump()) << n << " keys";
    ASSERT_EQ(ours.size(), n);
    EXPECT_EQ(ours.begin().key(), "k" + std::to_string(order[0]));
    EXPECT_EQ(ours.begin().value(), "last");
    EXPECT_EQ(parse_json_bounded(text, "x").dump(), json::parse(text).dump()) << n << " keys";
  }
}

TEST(JsonBounded, ThrowsNlohmannsOwnErrorsOrGivesADiscardedValue) {
  for (const std::string bad : {"", "{", "[1,]", "{\"a\" 1}", "[1] 2", "nul", "\"\\x\"", "1e999999"}) {
    EXPECT_TRUE(parse_ordered_json_bounded(bad, "x", false).is_discarded()) << bad;
    EXPECT_TRUE(parse_json_bounded(bad, "x", false).is_discarded()) << bad;
    EXPECT_THROW(parse_ordered_json_bounded(bad, "x"), json::exception) << bad;
  }
  EXPECT_THROW(parse_ordered_json_bounded("[1,", "x"), json::parse_error);
  EXPECT_THROW(parse_json_bounded("1e999999", "x"), json::out_of_range);
}

TEST(JsonBounded, RefusesNestingPastTheLimitEvenWithoutExceptions) {
  const std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_THROW(parse_ordered_json_bounded(deep, "x", false), Error);
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(parse_ordered_json_bounded(at_limit, "x").dump(), at_limit);
}

}  // namespace
}  // namespace pagoda
