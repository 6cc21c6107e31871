// JSON Schema to GBNF: random walks through each compiled grammar (a random code point the
// matcher accepts at each step, finishing when it can end) must give documents that an
// independent validator (Debian's python3-jsonschema) accepts; documents that break the
// schema must be refused by the matcher; integer ranges match exactly their integers; a
// schema compiles into a named rule inside a larger grammar; bad schemas are refused with
// the schema path.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/util/utf8.h"
#include "pagoda/error.h"
#include "support/grammar_support.h"

namespace pagoda::grammar {
namespace {

using json = nlohmann::ordered_json;
using test::expect_sentences;

std::shared_ptr<const Grammar> compile(const std::string& schema) {
  return test::grammar_of(json_schema_to_gbnf(schema));
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) { return test::is_sentence(g, text); }

std::string schema_error(const std::string& schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(compiled)";
}

// The code points a walk may choose from: printable ASCII, newline, tab and a few non-ASCII
// characters of each UTF-8 length.
std::vector<char32_t> alphabet() {
  std::vector<char32_t> a = {'\n', '\t', U'\u00E9', U'\u00FC', U'\u4E2D', U'\U0001F600'};
  for (char32_t c = 0x20; c < 0x7F; ++c) a.push_back(c);
  return a;
}

// One random document of the grammar: at each step a uniformly random accepted code point
// (the first of a shuffled alphabet that the matcher takes; a rejected one leaves it as it
// was), stopping when it can end with a chance that grows with the length, and trying
// closing characters first more often as the walk gets longer. Empty on a dead end.
std::string random_walk(const std::shared_ptr<const Grammar>& g, std::mt19937& rng) {
  static const std::vector<char32_t> kAlphabet = alphabet();
  GrammarMatcher m(g);
  std::string out;
  std::vector<char32_t> order = kAlphabet;
  for (size_t step = 0; step < 20000; ++step) {
    if (m.can_end() && rng() % 100 < 5 + step / 4) return out;
    std::shuffle(order.begin(), order.end(), rng);
    if (rng() % 1000 < std::min<size_t>(950, step * 3)) {
      for (const char32_t closer : {U']', U'}', U'"'})
        std::iter_swap(order.begin(), std::find(order.begin(), order.end(), closer));
    }
    bool moved = false;
    for (const char32_t c : order) {
      if (m.accept(c)) {
        append_utf8(c, out);
        moved = true;
        break;
      }
    }
    if (!moved) return m.can_end() ? out : std::string();
  }
  return std::string();
}

struct Validation {
  bool ran = false;
  std::string failures;  // one line per invalid document
  size_t checked = 0;
};

// Runs tests/data/validate_json_schema.py over the cases with /usr/bin/python3.
Validation validate_with_python(const json& cases) {
  Validation v;
  if (std::system("/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) return v;
  const std::string path = testing::TempDir() + "json_schema_documents.json";
  std::ofstream(path) << cases.dump();
  const std::string command =
      "/usr/bin/python3 " + std::string(PAGODA_SOURCE_DIR) + "/tests/data/validate_json_schema.py " + path;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return v;
  char line[4096];
  while (fgets(line, sizeof line, pipe)) {
    const std::string s(line);
    if (s.rfind("checked ", 0) == 0) {
      v.checked = std::stoul(s.substr(8));
      v.ran = true;
    } else {
      v.failures += s;
    }
  }
  pclose(pipe);
  return v;
}

// Hand-written schemas for the corners, one a line: nesting, mixed enums, ranges, lengths,
// patterns, formats, unions, merges and recursion.
std::vector<std::string> handwritten_schemas() {
  const std::string path = std::string(PAGODA_SOURCE_DIR) + "/tests/data/json_schema_corners.jsonl";
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::vector<std::string> schemas;
  for (std::string line; std::getline(in, line);) schemas.push_back(line);
  return schemas;
}

// A random schema: objects, arrays, unions and scalars with random constraints.
json random_schema(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return int(rng() % unsigned(n)); };
  const int kind = depth >= 3 ? pick(6) : pick(9);
  switch (kind) {
    case 0: {
      json s = {{"type", "integer"}};
      const int lo = pick(2000) - 1000;
      if (pick(3)) s["minimum"] = lo;
      if (pick(3)) s["maximum"] = lo + pick(3000);
      return s;
    }
    case 1: {
      json s = {{"type", "string"}};
      if (pick(2)) s["maxLength"] = pick(6);
      if (pick(3) == 0) s["minLength"] = pick(3);
      if (s.contains("maxLength") && s.contains("minLength") && s["minLength"] > s["maxLength"]) s.erase("minLength");
      return s;
    }
    case 2: {
      json values = json::array();
      for (int i = 0, n = 1 + pick(4); i < n; ++i) {
        const int v = pick(4);
        values.push_back(v == 0   ? json(pick(100))
                         : v == 1 ? json("v" + std::to_string(pick(50)))
                         : v == 2 ? json(nullptr)
                                  : json(pick(2) == 0));
      }
      return {{"enum", values}};
    }
    case 3: return {{"type", json::array({"number", "null"})}, {"minimum", -pick(50)}, {"maximum", pick(50) + 1}};
    case 4: return {{"type", "boolean"}};
    case 5: {
      static const char* kFormats[] = {"date", "time", "date-time", "uuid", "ipv4"};
      return {{"type", "string"}, {"format", kFormats[pick(5)]}};
    }
    case 6: {
      json s = {{"type", "object"}, {"properties", json::object()}};
      json required = json::array();
      for (int i = 0, n = pick(5); i < n; ++i) {
        const std::string key = std::string(1, char('a' + pick(6))) + (pick(2) ? "x" : "");
        s["properties"][key] = random_schema(rng, depth + 1);
        if (pick(2) && std::find(required.begin(), required.end(), key) == required.end()) required.push_back(key);
      }
      if (!required.empty()) s["required"] = required;
      const int extra = pick(4);
      if (extra == 1) s["additionalProperties"] = false;
      if (extra == 2) s["additionalProperties"] = true;
      if (extra == 3) s["additionalProperties"] = random_schema(rng, depth + 1);
      return s;
    }
    case 7: {
      json s = {{"type", "array"}, {"items", random_schema(rng, depth + 1)}};
      if (pick(2)) s["minItems"] = pick(3);
      if (pick(2)) s["maxItems"] = pick(3) + (s.contains("minItems") ? s["minItems"].get<int>() : 0);
      if (pick(3) == 0) s["prefixItems"] = json::array({random_schema(rng, depth + 1)});
      return s;
    }
    default: {
      json s = {{"anyOf", json::array()}};
      for (int i = 0, n = 2 + pick(2); i < n; ++i) s["anyOf"].push_back(random_schema(rng, depth + 1));
      return s;
    }
  }
}

TEST(JsonSchema, RandomWalksValidateWithPythonJsonschema) {
  std::vector<std::string> schemas = handwritten_schemas();
  std::mt19937 rng(20261124);
  for (int i = 0; i < 60; ++i) schemas.push_back(random_schema(rng, 0).dump());
  json cases = json::array();
  size_t documents = 0;
  for (const std::string& schema : schemas) {
    SCOPED_TRACE(schema);
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = compile(schema)) << json_schema_to_gbnf(schema);
    json docs = json::array();
    for (int walk = 0; walk < 25; ++walk) {
      const std::string doc = random_walk(g, rng);
      ASSERT_FALSE(doc.empty()) << "walk " << walk << " found a dead end or did not finish";
      EXPECT_TRUE(json::accept(doc)) << doc;
      EXPECT_TRUE(accepts(g, doc)) << doc;
      docs.push_back(doc);
    }
    documents += docs.size();
    cases.push_back({{"schema", json::parse(schema)}, {"documents", docs}});
  }
  const Validation v = validate_with_python(cases);
  if (!v.ran)
    GTEST_SKIP() << "/usr/bin/python3 with jsonschema (Debian python3-jsonschema) is absent: documents not validated";
  EXPECT_EQ(v.checked, documents);
  EXPECT_EQ(v.failures, "") << "case numbers index: handwritten first, then random; see " << testing::TempDir()
                            << "json_schema_documents.json";
}

TEST(JsonSchema, RejectsDocumentsThatBreakTheSchema) {
  const auto person = compile(
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
          "role": {"enum": ["admin", "user"]}}, "required": ["name"], "additionalProperties": false})");
  expect_sentences(person,
                   {R"({"name": "Ada", "age": 36, "role": "admin"})", R"({"name": "Ada"})",
                    "{\n  \"name\": \"Bo\",\n  \"role\": \"user\"\n}"},
                   // Line by line: a missing required property, a wrong type, too long; out of range; not in
                   // the enum, an extra property, two commas; something after the value, whitespace past the bound.
                   {R"({"age": 36})", R"({"name": 5})", R"({"name": "Adele"})", R"({"name": "Ada", "age": 151})",
                    R"({"name": "Ada", "age": -1})", R"({"name": "Ada", "age": 3.5})",
                    R"({"name": "Ada", "role": "root"})", R"({"name": "Ada", "email": "a@b.c"})",
                    R"({"name": "Ada",, "age": 1})", R"({"name": "Ada"}   )", "{\"name\":    \"Ada\"}"});

  const auto extras = compile(
      R"({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})");
  // A declared key only in its place.
  expect_sentences(extras, {R"({"id": 1, "ok": true, "idx": false})"},
                   {R"({"ok": true, "id": 1})", R"({"id": 1, "ok": 1})", R"({"id": 1, "id": 2})"});

  const auto tuple = compile(
      R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "minItems": 1})");
  expect_sentences(tuple, {R"(["a"])", R"(["a", 2])"}, {R"([])", R"(["a", 2, 3])", R"([1, "a"])"});

  const auto date = compile(R"({"type": "string", "format": "date"})");
  expect_sentences(date, {R"("2024-02-29")", R"("2000-02-29")"},
                   {R"("1900-02-29")", R"("2023-02-29")", R"("2023-04-31")", R"("0000-01-01")"});

  expect_sentences(compile(R"({"type": "string", "pattern": "^(cat|dog)s?$"})"), {R"("dogs")"}, {R"("cow")"});
  expect_sentences(compile(R"({"type": "string", "pattern": "b+c"})"), {R"("a bbc d")"}, {R"("a bd")"});  // unanchored

  // As zod writes z.uuid(): the pattern is written, and the format (the looser) holds too.
  const auto uuid = compile(
      R"({"type": "string", "format": "uuid", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"})");
  expect_sentences(uuid, {R"("0123abcd-0123-4567-89ab-0123456789ab")"},
                   {R"("0123abcd-0123-0567-89ab-0123456789ab")", R"("0123abcd-0123-4567-09ab-0123456789ab")"});

  // Records as zod writes them: any string keys, or the listed keys and no others.
  const auto record = compile(
      R"({"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {"type": "integer"}})");
  expect_sentences(record, {R"({})", R"({"a": 1, "b c": 2})"}, {R"({"a": "x"})"});
  const auto keyed = compile(
      R"({"type": "object", "propertyNames": {"type": "string", "enum": ["x", "y"]}, "additionalProperties": {"type": "boolean"}, "required": ["x"]})");
  expect_sentences(keyed, {R"({"x": true})", R"({"x": true, "y": false})"},
                   {R"({"y": false})", R"({"x": true, "z": false})", R"({"x": 1})"});

  // OpenAPI's spelling.
  const auto nullable = compile(R"({"type": "string", "nullable": true, "maxLength": 3})");
  expect_sentences(nullable, {"null", R"("abc")"}, {R"("abcd")"});

  const auto number = compile(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})");
  expect_sentences(number, {"0.5", "1"}, {"0", "1.5", "-0.5"});
}

// Every string a grammar over digits and '-' accepts, up to `max_length` characters.
void enumerate(const GrammarMatcher& m, std::string& text, size_t max_length, std::set<std::string>& out) {
  if (m.can_end()) out.insert(text);
  if (text.size() == max_length) return;
  for (const char c : std::string("-0123456789")) {
    GrammarMatcher next = m;
    if (!next.accept(char32_t(c))) continue;
    text.push_back(c);
    enumerate(next, text, max_length, out);
    text.pop_back();
  }
}

TEST(JsonSchema, IntegerRangesAreExact) {
  std::mt19937 rng(7);
  std::vector<std::pair<int, int>> ranges = {{-15, 1234}, {0, 9}, {-9, -1},  {10, 99},   {-1000, 1000},
                                             {7, 7},      {0, 0}, {99, 101}, {-101, -99}};
  for (int i = 0; i < 30; ++i) {
    const int lo = int(rng() % 4000) - 2000;
    ranges.emplace_back(lo, lo + int(rng() % 1500));
  }
  for (const auto& [lo, hi] : ranges) {
    const std::string schema =
        "{\"type\": \"integer\", \"minimum\": " + std::to_string(lo) + ", \"maximum\": " + std::to_string(hi) + "}";
    SCOPED_TRACE(schema);
    std::set<std::string> got, want;
    std::string text;
    enumerate(GrammarMatcher(compile(schema)), text, 6, got);
    for (int v = lo; v <= hi; ++v) want.insert(std::to_string(v));
    EXPECT_EQ(got, want);
  }
  // Large bounds: the ends and their neighbours.
  const auto big = compile(R"({"type": "integer", "minimum": -987654321012, "exclusiveMaximum": 5000000000000000})");
  expect_sentences(big, {"-987654321012", "4999999999999999"}, {"-987654321013", "5000000000000000", "-0", "007"});
}

TEST(JsonSchema, IntegerWalksReachBothEnds) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-15, 1234}, {0, 9}}) {
    const auto g = compile("{\"type\": \"integer\", \"minimum\": " + std::to_string(lo) +
                           ", \"maximum\": " + std::to_string(hi) + "}");
    std::mt19937 rng(11);
    int seen_lo = hi, seen_hi = lo;
    for (int walk = 0; walk < 20000; ++walk) {
      const std::string doc = random_walk(g, rng);
      ASSERT_FALSE(doc.empty());
      const int v = std::stoi(doc);
      ASSERT_GE(v, lo);
      ASSERT_LE(v, hi);
      seen_lo = std::min(seen_lo, v);
      seen_hi = std::max(seen_hi, v);
    }
    EXPECT_EQ(seen_lo, lo);
    EXPECT_EQ(seen_hi, hi);
  }
}

TEST(JsonSchema, NamedRulesComposeIntoALargerGrammar) {
  const JsonSchemaRules weather = json_schema_rules(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}}, "required": ["city"]})",
      "weather-args");
  const JsonSchemaRules time = json_schema_rules(
      R"({"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]})",
      "time-args");
  EXPECT_EQ(weather.root, "weather-args");
  const std::string gbnf = "root ::= \"{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": \" " + weather.root +
                           " \"}\" | \"{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": \" " + time.root +
                           " \"}\"\n" + weather.rules + time.rules;
  const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
  EXPECT_TRUE(accepts(g, R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}})"));
  EXPECT_TRUE(accepts(g, R"({"name": "get_time", "arguments": {"zone": "UTC"}})"));
  EXPECT_FALSE(accepts(g, R"({"name": "get_time", "arguments": {"city": "Oslo"}})"));
  EXPECT_FALSE(accepts(g, R"({"name": "get_weather", "arguments": {"unit": "C"}})"));
  // Every rule of a fragment carries its prefix.
  for (const auto& [prefix, rules] : {std::pair{weather.root, weather.rules}, std::pair{time.root, time.rules}}) {
    size_t at = 0;
    while (at < rules.size()) {
      EXPECT_EQ(rules.compare(at, prefix.size(), prefix), 0) << rules.substr(at, rules.find('\n', at) - at);
      at = rules.find('\n', at) + 1;
    }
  }
  EXPECT_THROW(json_schema_rules("{}", "bad prefix"), Error);
}

TEST(JsonSchema, AnyJsonObject) {
  const auto g = std::make_shared<const Grammar>(parse_gbnf(any_json_gbnf()));
  EXPECT_TRUE(accepts(g, R"({"a": [1, 2.5e3, {"b": null}], "c": "\u00e9"})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "\"x\""));
}

TEST(JsonSchema, RefusalsNameTheSchemaPath) {
  EXPECT_EQ(schema_error(R"({"properties": {"age": {"type": "integer", "minimum": "x"}}})"),
            "json schema: /properties/age/minimum: must be a number");
  EXPECT_EQ(schema_error(R"({"type": "strin"})"), "json schema: /type: unknown type 'strin'");
  EXPECT_EQ(schema_error(R"({"properties": {"a": {"not": {"type": "string"}}}})"),
            "json schema: /properties/a/not: not supported for generation");
  EXPECT_EQ(schema_error(R"({"type": "string", "maxLength": 5000})"),
            "json schema: /maxLength: above 1000, the largest count pagoda compiles");
  EXPECT_EQ(schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})"),
            "json schema: /: no integer satisfies the bounds");
  EXPECT_EQ(schema_error(R"({"$ref": "#/$defs/missing"})"), "json schema: /$ref: '#/$defs/missing' points at nothing");
  EXPECT_EQ(schema_error(R"({"$ref": "https://example.com/s.json"})"),
            "json schema: /$ref: only local references ('#...') are supported, not 'https://example.com/s.json'");
  EXPECT_EQ(
      schema_error(
          R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "null"}]}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"),
      "json schema: /$defs/b/$ref: '#/$defs/a' refers back to itself (#/$defs/a -> #/$defs/b -> #/$defs/a) without an "
      "object or array in between");
  EXPECT_EQ(schema_error(R"({"items": {"type": "string", "pattern": "^(?=a)b$"}})"),
            "json schema: /items/pattern: pattern: lookaround and named groups are not supported (at character 2)");
  EXPECT_EQ(schema_error(R"({"type": "string", "pattern": "a", "maxLength": 3})"),
            "json schema: /pattern: a pattern together with a length is not supported");
  EXPECT_EQ(schema_error(R"({"type": "object", "propertyNames": {"type": "string", "maxLength": 3}})"),
            "json schema: /propertyNames/maxLength: not supported for generation");
  EXPECT_EQ(schema_error(R"({"propertyNames": {"enum": ["a"]}, "properties": {"a": {}}})"),
            "json schema: /propertyNames: listed keys together with 'properties' are not supported");
  EXPECT_EQ(schema_error(R"({"propertyNames": {"enum": ["a", 1]}})"),
            "json schema: /propertyNames: a key that is not a string");
  {
    // 2,000 keys each copying a 1 kB value schema: 2 MB of schema from 1 kB of value.
    json s = {{"propertyNames", {{"enum", json::array()}}},
              {"additionalProperties", {{"type", "string"}, {"description", std::string(1000, 'x')}}}};
    for (int i = 0; i < 2000; ++i) s["propertyNames"]["enum"].push_back("k" + std::to_string(i));
    EXPECT_EQ(schema_error(s.dump()),
              "json schema: /propertyNames: too many keys for the size of the record's value schema");
  }
  EXPECT_EQ(schema_error(R"({"enum": [1, 2], "type": "string"})"), "json schema: /enum: no value of the schema's type");
  EXPECT_EQ(schema_error(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"),
            "json schema: /allOf: the parts' types have nothing in common");
  EXPECT_EQ(schema_error(R"({"allOf": [{"$ref": "#"}]})"),
            "json schema: /allOf/0/$ref: '#' is merged into itself (a $ref cycle through allOf)");
  EXPECT_EQ(schema_error(R"({"type": "array", "uniqueItems": 1})"), "json schema: /uniqueItems: must be a boolean");
  EXPECT_EQ(schema_error(R"({"properties": {"a": false}, "required": ["a"]})"),
            "json schema: /properties/a: the schema false admits no value");
  EXPECT_EQ(schema_error(R"({"type": "number", "minimum": 0.25, "maximum": 0.75})"),
            "json schema: /: no number pagoda can write satisfies the bounds (number bounds are kept at integer "
            "granularity)");
  EXPECT_EQ(schema_error("{\"type\": ").rfind("json schema: not valid JSON: ", 0), 0u);
  EXPECT_EQ(schema_error("[1]"), "json schema: /: a schema must be an object or a boolean");
}

TEST(JsonSchema, OutputIsBounded) {
  // Deep nesting, exponential allOf over $refs, and many large repetitions are refused.
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = "{\"items\": " + deep + "}";
  EXPECT_NE(schema_error(deep).find("nested deeper than 64"), std::string::npos) << schema_error(deep);
  std::string defs = R"({"$defs": {"d0": {"type": "object", "properties": {"x": {"type": "integer"}}})";
  for (int i = 1; i < 40; ++i) {
    defs += ", \"d" + std::to_string(i) + "\": {\"allOf\": [{\"$ref\": \"#/$defs/d" + std::to_string(i - 1) +
            "\"}, {\"anyOf\": [{\"$ref\": \"#/$defs/d" + std::to_string(i - 1) + "\"}, {\"required\": [\"x\"]}]}]}";
  }
  defs += R"(}, "$ref": "#/$defs/d39"})";
  EXPECT_NE(schema_error(defs).find("json schema: "), std::string::npos);
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 50; ++i)
    many += std::string(i ? ", " : "") + "\"p" + std::to_string(i) + "\": {\"type\": \"string\", \"maxLength\": 1000}";
  many += "}}";
  EXPECT_NE(schema_error(many).find("repetitions add up to more than 40000"), std::string::npos) << schema_error(many);
}

}  // namespace
}  // namespace pagoda::grammar
