// The public entry points: parse the schema text (at most kMaxJsonDepth deep, so copies and
// dumps of its parts cannot overflow the stack), compile, name the rules.

#include "engine/grammar/json_schema.h"

#include "engine/grammar/json_schema_compiler.h"
#include "engine/util/json_depth.h"
#include "pagoda/error.h"

namespace pagoda::grammar {
namespace {

OrderedJson parse_schema(std::string_view text) {
  try {
    return parse_ordered_json_bounded(text, "json schema");
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("json schema: not valid JSON: ") + e.what());
  }
}

bool is_rule_name(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

}  // namespace

JsonSchemaRules json_schema_rules(std::string_view schema_json, std::string_view prefix) {
  if (!is_rule_name(prefix))
    throw Error("json schema: rule prefix '" + std::string(prefix) + "' is not a GBNF rule name");
  const OrderedJson schema = parse_schema(schema_json);
  JsonSchemaCompiler compiler(schema, std::string(prefix));
  JsonSchemaRules out;
  out.root = compiler.compile_root();
  out.rules = compiler.text();
  return out;
}

std::string json_schema_to_gbnf(std::string_view schema_json) {
  const OrderedJson schema = parse_schema(schema_json);
  JsonSchemaCompiler compiler(schema, "");
  compiler.compile_root();
  return compiler.text();
}

std::string any_json_gbnf() { return json_schema_to_gbnf(R"({"type": "object"})"); }

}  // namespace pagoda::grammar
