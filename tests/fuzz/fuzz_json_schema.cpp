// JSON Schema compilation on arbitrary bytes: the input up to the first NUL byte is a schema,
// the rest text for its grammar. The same bytes are also read as choices that build a schema
// (nested and sibling properties, items, anyOf, allOf, not, $ref chains and cycles, deep
// consts and patterns), so the harness reaches structures thousands deep that byte flips of
// text rarely do. Compiling must succeed or refuse with pagoda::Error; a compiled grammar must
// parse (anything else is a compiler bug, so it aborts) and its matcher then takes the text a
// code point at a time, bounded by its own limits.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Generated text stops growing here, so one input stays quick.
constexpr size_t kMaxGenerated = size_t(1) << 20;

std::string repeated(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && out.size() < kMaxGenerated; ++i) out += s;
  return out;
}

// Appends one schema built from `in`, without recursion (it may nest thousands deep): openers
// write their head and wait for a child, leaves are whole schemas, and after each child the
// enclosing opener takes a sibling or closes.
void write_schema(pagoda::fuzz::Choices& in, std::string& out) {
  enum class Kind { Properties, Array, Single };
  struct Level {
    Kind kind;
    std::string close;
  };
  struct Opener {
    const char* head;
    Kind kind;
    const char* close;
  };
  static const Opener kOpeners[] = {
      {R"({"type": "object", "properties": {"p": )", Kind::Properties, R"(}, "required": ["p"]})"},
      {R"({"type": "array", "items": )", Kind::Single, "}"},
      {R"({"anyOf": [)", Kind::Array, "]}"},
      {R"({"allOf": [)", Kind::Array, "]}"},
      {R"({"not": )", Kind::Single, "}"},
      {R"({"type": "object", "additionalProperties": )", Kind::Single, "}"},
      {R"({"prefixItems": [)", Kind::Array, R"(], "items": false})"},
      {R"({"nullable": true, "allOf": [{"minItems": 1}, )", Kind::Array, "]}"},
  };
  static const char* const kLeaves[] = {
      R"({"type": "string"})",
      R"({"type": "integer", "minimum": -3, "maximum": 300})",
      R"({"enum": [1, "a", null, [2]]})",
      R"({"$ref": "#/$defs/d0"})",
      R"({"$ref": "#/$defs/d1"})",
      R"({"$ref": "#"})",
      R"({"type": "string", "maxLength": 5})",
      "true",
      R"({"type": "number", "exclusiveMinimum": 0.5})",
      R"({"type": ["null", "boolean"]})",
  };
  std::vector<Level> open;
  size_t names = 0;
  bool child_due = true;
  while (true) {
    if (in.done() || out.size() > kMaxGenerated) {
      if (child_due) out += "{}";
      for (; !open.empty(); open.pop_back()) out += open.back().close;
      return;
    }
    const uint8_t op = in.next();
    if (!child_due) {
      if (open.empty()) return;
      const Level& level = open.back();
      if (op % 3 != 0 && level.kind != Kind::Single) {
        out += level.kind == Kind::Array ? ", " : ", \"p" + std::to_string(++names) + "\": ";
        child_due = true;
      } else {
        // Closes this level and the run of one-child levels around it (a deep chain ends in one choice).
        do {
          out += open.back().close;
          open.pop_back();
        } while (!open.empty() && open.back().kind == Kind::Single);
      }
      continue;
    }
    const size_t choice = op % 16;
    if (choice < std::size(kOpeners)) {
      const Opener& o = kOpeners[choice];
      const size_t n = op & 0x80 ? in.count() : 1;
      for (size_t i = 0; i < n && out.size() < kMaxGenerated; ++i) {
        out += o.head;
        open.push_back({o.kind, o.close});
      }
      continue;
    }
    if (choice == 8) {  // a deep const
      const size_t n = in.count();
      out += R"({"const": )" + repeated("[", n) + repeated("]", n) + "}";
    } else if (choice == 9) {  // a pattern of nested groups
      const size_t n = in.count();
      out += R"({"type": "string", "pattern": ")" + repeated("(a|", n) + "b" + repeated(")+", n) + "\"}";
    } else {
      out += kLeaves[in.next() % std::size(kLeaves)];
    }
    child_due = false;
  }
}

// A schema with two $defs, each built from `in`, and a root that refers to them.
std::string generated_schema(std::string_view bytes) {
  pagoda::fuzz::Choices in(bytes);
  std::string out = R"({"$defs": {"d0": )";
  write_schema(in, out);
  out += R"(, "d1": )";
  write_schema(in, out);
  out += R"(}, "allOf": [)";
  write_schema(in, out);
  return out + "]}";
}

void compile_and_match(std::string_view schema, std::string_view text) {
  std::string gbnf;
  pagoda::fuzz::expect_clean([&] { gbnf = pagoda::grammar::json_schema_to_gbnf(schema); });
  if (gbnf.empty()) return;
  std::shared_ptr<const pagoda::grammar::Grammar> grammar;
  try {
    grammar = std::make_shared<const pagoda::grammar::Grammar>(pagoda::grammar::parse_gbnf(gbnf));
  } catch (const pagoda::Error&) {
    std::abort();  // the compiler wrote a grammar its own parser refuses
  }
  pagoda::fuzz::expect_clean([&] {
    pagoda::grammar::GrammarMatcher matcher(grammar);
    for (const char c : text) {
      if (!matcher.accept_utf8(std::string_view(&c, 1))) break;
    }
    (void)matcher.can_end();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::check_written_and_generated(data, size, compile_and_match, generated_schema);
  return 0;
}
