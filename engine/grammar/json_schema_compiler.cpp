// The compiler's core: rule naming and the shared rules, $ref (with the left-recursion
// check), the dispatch on a schema's keywords, unions, enums and consts.

#include <algorithm>
#include <cctype>
#include <cmath>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_compiler.h"
#include "engine/util/stack_room.h"
#include "pagoda/error.h"

namespace pagoda::grammar {
namespace {

using json = OrderedJson;

// Keywords whose values cannot be honoured while generating (refused when present).
const std::set<std::string> kRefused = {"not",
                                        "if",
                                        "then",
                                        "else",
                                        "dependentRequired",
                                        "dependentSchemas",
                                        "dependencies",
                                        "patternProperties",
                                        "propertyNames",
                                        "contains",
                                        "minContains",
                                        "maxContains",
                                        "unevaluatedProperties",
                                        "unevaluatedItems",
                                        "multipleOf",
                                        "$dynamicRef",
                                        "$recursiveRef"};
const std::set<std::string> kObjectKeywords = {"properties", "additionalProperties", "required", "minProperties",
                                               "maxProperties"};
const std::set<std::string> kArrayKeywords = {"items",    "prefixItems", "additionalItems",
                                              "minItems", "maxItems",    "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::vector<std::string> kAllTypes = {"null", "boolean", "object", "array", "number", "string"};

bool is_validation_keyword(const std::string& k) {
  return kObjectKeywords.count(k) || kArrayKeywords.count(k) || kStringKeywords.count(k) || kNumberKeywords.count(k) ||
         k == "type" || k == "enum" || k == "const" || k == "nullable" || k == "$ref" || k == "allOf" || k == "anyOf" ||
         k == "oneOf";
}

bool value_has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

constexpr size_t kMaxRecordCopyBytes = size_t(1) << 20;

// `s` without its propertyNames, as zod writes records: a key schema that only says keys are
// strings says nothing (every key is), and one that lists the keys (enum or const), on an
// object declaring no `properties`, makes them the properties, each holding the record's value
// schema (`additionalProperties`), with no other keys. Other key schemas are refused.
json without_property_names(const json& s, const std::string& path) {
  const json& names = s["propertyNames"];
  const std::string names_path = JsonSchemaCompiler::child_path(path, "propertyNames");
  json rest = s;
  rest.erase("propertyNames");
  if (names.is_boolean() && names.get<bool>()) return rest;
  if (!names.is_object()) JsonSchemaCompiler::fail(names_path, "not supported for generation");
  for (const auto& [k, v] : names.items()) {
    const bool says_string = k == "type" && v == "string";
    if ((is_validation_keyword(k) || kRefused.count(k)) && !says_string && k != "enum" && k != "const")
      JsonSchemaCompiler::fail(JsonSchemaCompiler::child_path(names_path, k), "not supported for generation");
  }
  if (!names.contains("enum") && !names.contains("const")) return rest;
  if (names.contains("enum") && names.contains("const"))
    JsonSchemaCompiler::fail(names_path, "enum and const together are not supported");
  json keys = names.contains("const") ? json::array({names["const"]}) : names["enum"];
  if (!keys.is_array())
    JsonSchemaCompiler::fail(JsonSchemaCompiler::child_path(names_path, "enum"), "must be an array");
  if (s.contains("properties"))
    JsonSchemaCompiler::fail(names_path, "listed keys together with 'properties' are not supported");
  const json value = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
  // Each key gets a copy of the value schema: bounded, so a short body cannot grow into a huge one.
  if (keys.size() * value.dump().size() > kMaxRecordCopyBytes)
    JsonSchemaCompiler::fail(names_path, "too many keys for the size of the record's value schema");
  json properties = json::object();
  for (const json& key : keys) {
    if (!key.is_string()) JsonSchemaCompiler::fail(names_path, "a key that is not a string");
    properties[key.get<std::string>()] = value;
  }
  rest["properties"] = std::move(properties);
  rest["additionalProperties"] = false;
  return rest;
}

}  // namespace

[[noreturn]] void JsonSchemaCompiler::fail(const std::string& path, const std::string& what) {
  throw Error("json schema: " + (path.empty() ? std::string("/") : path) + ": " + what);
}

std::string JsonSchemaCompiler::child_path(const std::string& path, const std::string& key) {
  std::string escaped;
  for (const char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return path + "/" + escaped;
}

std::string JsonSchemaCompiler::sanitize(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= 40) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

JsonSchemaCompiler::JsonSchemaCompiler(const json& doc, std::string prefix) : doc_(doc), prefix_(std::move(prefix)) {
  for (const char* p :
       {"space", "value", "object", "member", "array", "string", "char", "number", "integer", "boolean", "null"}) {
    reserved_.insert(p);
  }
}

std::string JsonSchemaCompiler::compile_root() {
  const std::string root = prefix_.empty() ? "root" : prefix_;
  taken_[root] = "";
  order_.push_back(root);
  ref_rules_["#"] = root;
  current_ref_ = "#";
  const std::string term = compile(doc_, "", "", 0);
  taken_[root] = term;
  check_ref_cycles();
  return root;
}

std::string JsonSchemaCompiler::text() const {
  std::string out;
  for (const std::string& name : order_) out += name + " ::= " + taken_.at(name) + "\n";
  if (out.size() > kMaxGrammarBytes)
    fail("", "the grammar would be larger than " + std::to_string(kMaxGrammarBytes) + " bytes");
  return out;
}

// Defines a rule for `body` named after `local` (suffixed -2, -3, ... if taken by another
// body), or returns the body itself when it is already a single rule name.
std::string JsonSchemaCompiler::named(const std::string& local, const std::string& body) {
  if (body.find_first_of(" ()|\"[") == std::string::npos && taken_.count(body)) return body;
  if (local == inline_local_) return body;  // the body of the root's or a $ref's own rule
  const std::string& base = local;
  for (int n = 1;; ++n) {
    const std::string candidate = qualify(n == 1 ? base : base + "-" + std::to_string(n));
    if (n == 1 && reserved_.count(base)) continue;
    const auto it = taken_.find(candidate);
    if (it == taken_.end()) {
      define(candidate, body);
      return candidate;
    }
    if (it->second == body) return candidate;
  }
}

void JsonSchemaCompiler::define(const std::string& name, const std::string& body) {
  taken_[name] = body;
  order_.push_back(name);
  bytes_ += name.size() + body.size();
  if (bytes_ > kMaxGrammarBytes)
    fail("", "the grammar would be larger than " + std::to_string(kMaxGrammarBytes) + " bytes");
}

// The shared rules for plain JSON, defined on first use.
std::string JsonSchemaCompiler::primitive(const std::string& id) {
  const std::string name = qualify(id);
  if (taken_.count(name)) return name;
  static const std::map<std::string, std::string> kBodies = {
      {"space", R"(( " " | "\n" [ \t]{0,20} )?)"},
      {"char",
       R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"},
      {"string", R"("\"" @char* "\"")"},
      {"integer", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
      {"number", R"(@integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"value", R"(@object | @array | @string | @number | @boolean | @null)"},
      {"member", R"(@string @space ":" @space @value)"},
      {"object", R"("{" ( @space @member ( @space "," @space @member )* )? @space "}")"},
      {"array", R"("[" ( @space @value ( @space "," @space @value )* )? @space "]")"},
  };
  define(name, "");
  std::string body;
  const std::string& tmpl = kBodies.at(id);
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '@') {
      body += tmpl[i];
      continue;
    }
    size_t end = i + 1;
    while (end < tmpl.size() && (std::isalnum(uint8_t(tmpl[end])) || tmpl[end] == '-')) ++end;
    body += primitive(tmpl.substr(i + 1, end - i - 1));
    i = end - 1;
  }
  taken_[name] = body;
  return name;
}

void JsonSchemaCompiler::take_repetition(size_t min, size_t max, const std::string& path) {
  const size_t cost = max == kUnbounded ? min + 1 : max;
  if (cost > budget_) fail(path, "the schema's repetitions add up to more than " + std::to_string(kMaxTotalRepetition));
  budget_ -= cost;
}

size_t JsonSchemaCompiler::count(const json& s, const char* key, const std::string& path, size_t fallback) {
  if (!s.contains(key)) return fallback;
  const json& v = s[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    fail(child_path(path, key), "must be a non-negative integer");
  }
  const auto n = v.get<uint64_t>();
  if (n > kSchemaMaxRepetition)
    fail(child_path(path, key),
         "above " + std::to_string(kSchemaMaxRepetition) + ", the largest count pagoda compiles");
  return size_t(n);
}

const json& JsonSchemaCompiler::resolve(const std::string& ref, const std::string& path) {
  if (ref.empty() || ref[0] != '#') fail(path, "only local references ('#...') are supported, not '" + ref + "'");
  const json* at = &doc_;
  size_t i = 1;
  if (i < ref.size() && ref[i] != '/') fail(path, "'" + ref + "' is not a JSON pointer");
  while (i < ref.size()) {
    const size_t end = std::min(ref.find('/', i + 1), ref.size());
    std::string token;
    for (size_t k = i + 1; k < end; ++k) {
      if (ref[k] == '~' && k + 1 < end && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
        token += ref[++k] == '0' ? '~' : '/';
      } else {
        token += ref[k];
      }
    }
    if (at->is_object() && at->contains(token)) {
      at = &(*at)[token];
    } else if (at->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
               token.size() < 10 && std::stoul(token) < at->size()) {
      at = &(*at)[std::stoul(token)];
    } else {
      fail(path, "'" + ref + "' points at nothing");
    }
    i = end;
  }
  return *at;
}

std::string JsonSchemaCompiler::ref_rule(const json& ref_value, const std::string& path, size_t depth) {
  if (!ref_value.is_string()) fail(path, "must be a string");
  const std::string ref = ref_value.get<std::string>();
  if (!current_ref_.empty()) ref_edges_[current_ref_].push_back({ref, path});
  const auto known = ref_rules_.find(ref);
  if (known != ref_rules_.end()) return known->second;
  const json& target = resolve(ref, path);
  const std::string local = sanitize(ref.substr(ref.find_last_of('/') + 1));
  std::string name;
  for (int n = 1;; ++n) {
    name = qualify(n == 1 ? local : local + "-" + std::to_string(n));
    if ((n > 1 || !reserved_.count(local)) && !taken_.count(name)) break;
  }
  define(name, "");
  ref_rules_[ref] = name;
  const std::string saved_ref = current_ref_, saved_inline = inline_local_;
  current_ref_ = ref;
  inline_local_ = name.substr(prefix_.empty() ? 0 : prefix_.size() + 1);
  const std::string term = compile(target, inline_local_, ref.substr(1), depth + 1);
  current_ref_ = saved_ref;
  inline_local_ = saved_inline;
  taken_[name] = term;
  return name;
}

// A $ref reaching itself with nothing read in between would be left recursion. A depth-first
// search with its own stack: the edges can chain every $ref of the schema (each met from a
// different property, so compiling them never nested).
void JsonSchemaCompiler::check_ref_cycles() const {
  std::map<std::string, int> state;                         // 1 on the path, 2 done
  std::vector<std::pair<const std::string*, size_t>> path;  // a ref on the path, its next edge
  for (const auto& [start, unused] : ref_edges_) {
    if (state[start] != 0) continue;
    state[start] = 1;
    path.emplace_back(&start, 0);
    while (!path.empty()) {
      const std::string& ref = *path.back().first;
      const auto edges = ref_edges_.find(ref);
      if (edges == ref_edges_.end() || path.back().second == edges->second.size()) {
        state[ref] = 2;
        path.pop_back();
        continue;
      }
      const auto& [next, at] = edges->second[path.back().second++];
      if (state[next] == 1) {
        std::string cycle;
        size_t i = 0;
        while (*path[i].first != next) ++i;
        for (; i < path.size(); ++i) cycle += *path[i].first + " -> ";
        fail(at, "'" + next + "' refers back to itself (" + cycle + next + ") without an object or array in between");
      }
      if (state[next] == 0) {
        state[next] = 1;
        path.emplace_back(&next, 0);
      }
    }
  }
}

// The term (a rule name or literal) for a value of schema `s`.
std::string JsonSchemaCompiler::compile(const json& s, const std::string& local, const std::string& path,
                                        size_t depth) {
  if (depth > kSchemaMaxDepth) fail(path, "nested deeper than " + std::to_string(kSchemaMaxDepth));
  if (stack_nearly_full()) fail(path, "nested too deeply for this thread's stack");
  if (++subschemas_ > kSchemaMaxSubschemas)
    fail(path, "more than " + std::to_string(kSchemaMaxSubschemas) + " subschemas to compile");
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail(path, "the schema false admits no value");
    return primitive("value");
  }
  if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
  if (s.contains("propertyNames")) return compile(without_property_names(s, path), local, path, depth + 1);
  for (const auto& [k, v] : s.items()) {
    if (kRefused.count(k)) fail(child_path(path, k), "not supported for generation");
  }
  bool other_validation = false;
  for (const auto& [k, v] : s.items()) other_validation = other_validation || (is_validation_keyword(k) && k != "$ref");
  if (s.contains("$ref") && !other_validation) return ref_rule(s["$ref"], child_path(path, "$ref"), depth);
  if (s.contains("$ref") || s.contains("allOf")) {
    const RefResolver resolver = [this](const std::string& ref, const std::string& p) -> const json& {
      if (!current_ref_.empty()) ref_edges_[current_ref_].push_back({ref, p});
      return resolve(ref, p);
    };
    return compile(merge_all_of(s, path, resolver, subschemas_), local, path, depth + 1);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return compile_union(s, local, path, depth);
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail(child_path(path, "nullable"), "must be a boolean");
    json rest = s;
    rest.erase("nullable");
    if (!s["nullable"].get<bool>()) return compile(rest, local, path, depth + 1);
    const std::string inner = compile(rest, join_local(local, "value"), path, depth + 1);
    return named(local, inner + " | " + primitive("null"));
  }
  const std::vector<std::string> types = types_of(s, path);
  if (s.contains("const") || s.contains("enum")) return named(local, literals(s, types, path));
  std::vector<std::string> bodies;
  for (const std::string& t : types) {
    if (t == "integer" && std::find(types.begin(), types.end(), "number") != types.end()) continue;
    bodies.push_back(typed(s, t, types.size() == 1 ? local : join_local(local, t), path, depth));
  }
  if (bodies.size() == 1) return named(local, bodies[0]);
  if (bodies.size() == kAllTypes.size() && !has_type_keywords(s)) return primitive("value");
  std::string body;
  for (const std::string& b : bodies) body += (body.empty() ? "" : " | ") + named(join_local(local, "alt"), b);
  return named(local, body);
}

bool JsonSchemaCompiler::has_type_keywords(const json& s) {
  for (const auto& [k, v] : s.items()) {
    if (kObjectKeywords.count(k) || kArrayKeywords.count(k) || kStringKeywords.count(k) || kNumberKeywords.count(k))
      return true;
  }
  return false;
}

std::string JsonSchemaCompiler::compile_union(const json& s, const std::string& local, const std::string& path,
                                              size_t depth) {
  if (s.contains("anyOf") && s.contains("oneOf")) fail(path, "anyOf and oneOf together are not supported");
  const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const json& branches = s[key];
  const std::string branches_path = child_path(path, key);
  if (!branches.is_array() || branches.empty()) fail(branches_path, "must be a non-empty array");
  json rest = s;
  rest.erase(key);
  bool constrained = false;
  for (const auto& [k, v] : rest.items()) constrained = constrained || is_validation_keyword(k);
  std::string body;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string branch_local = join_local(local, "option-" + std::to_string(i + 1));
    const std::string branch_path = child_path(branches_path, std::to_string(i));
    // Keywords beside the anyOf apply to every branch: allOf(rest, branch).
    const std::string term = constrained
                                 ? compile(json{{"allOf", {rest, branches[i]}}}, branch_local, branch_path, depth + 1)
                                 : compile(branches[i], branch_local, branch_path, depth + 1);
    body += (body.empty() ? "" : " | ") + term;
  }
  return named(local, body);
}

std::vector<std::string> JsonSchemaCompiler::types_of(const json& s, const std::string& path) const {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const json& t = s["type"];
    const std::string type_path = child_path(path, "type");
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const json& x : t) {
        if (!x.is_string()) fail(type_path, "must be a type name or a non-empty array of them");
        types.push_back(x.get<std::string>());
      }
    } else {
      fail(type_path, "must be a type name or a non-empty array of them");
    }
    for (const std::string& x : types) {
      if (x != "integer" && std::find(kAllTypes.begin(), kAllTypes.end(), x) == kAllTypes.end())
        fail(type_path, "unknown type '" + x + "'");
    }
    return types;
  }
  // No type: the types the keywords describe, or all of them.
  for (const auto& [k, v] : s.items()) {
    const char* implied = kObjectKeywords.count(k)   ? "object"
                          : kArrayKeywords.count(k)  ? "array"
                          : kStringKeywords.count(k) ? "string"
                          : kNumberKeywords.count(k) ? "number"
                                                     : nullptr;
    if (implied && std::find(types.begin(), types.end(), implied) == types.end()) types.push_back(implied);
  }
  return types.empty() ? kAllTypes : types;
}

std::string JsonSchemaCompiler::literals(const json& s, const std::vector<std::string>& types,
                                         const std::string& path) {
  std::vector<json> values;
  if (s.contains("const")) {
    values.push_back(s["const"]);
    if (s.contains("enum") &&
        (!s["enum"].is_array() || std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end())) {
      fail(child_path(path, "const"), "not one of the enum's values");
    }
  } else {
    if (!s["enum"].is_array() || s["enum"].empty()) fail(child_path(path, "enum"), "must be a non-empty array");
    values.assign(s["enum"].begin(), s["enum"].end());
  }
  std::string body;
  for (const json& v : values) {
    const bool typed_ok =
        std::any_of(types.begin(), types.end(), [&](const std::string& t) { return value_has_type(v, t); });
    if (typed_ok) body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
  }
  if (body.empty()) fail(child_path(path, s.contains("const") ? "const" : "enum"), "no value of the schema's type");
  return body;
}

std::string JsonSchemaCompiler::typed(const json& s, const std::string& t, const std::string& local,
                                      const std::string& path, size_t depth) {
  if (t == "null" || t == "boolean") return primitive(t);
  if (t == "integer") return integer_body(s, path);
  if (t == "number") return number_body(s, path);
  // Strings, arrays and objects read a character before anything nested: no left recursion.
  const std::string saved = current_ref_;
  current_ref_.clear();
  std::string body = t == "string"  ? string_body(s, path)
                     : t == "array" ? array_body(s, local, path, depth)
                                    : object_body(s, local, path, depth);
  current_ref_ = saved;
  return body;
}

}  // namespace pagoda::grammar
