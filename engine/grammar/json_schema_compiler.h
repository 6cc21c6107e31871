#pragma once
// The JSON Schema compiler behind engine/grammar/json_schema.h, internal to engine/grammar:
// one pass over the schema, each subschema a GBNF rule named after where it sits (property
// names, $defs names), shared rules for plain JSON types. Values carry no whitespace around
// them; objects and arrays put `space` between their tokens. Split over
// json_schema_compiler.cpp (naming, $ref, unions, enums), json_schema_values.cpp (numbers,
// strings, arrays) and json_schema_objects.cpp.

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/grammar/json_schema_merge.h"

namespace pagoda::grammar {

class JsonSchemaCompiler {
 public:
  using json = OrderedJson;

  // All bounded repetitions together (each counts its upper bound, or its minimum plus one
  // when unbounded): keeps the parsed grammar well below the parser's 2^18 elements.
  static constexpr size_t kMaxTotalRepetition = 40000;
  static constexpr size_t kMaxGrammarBytes = size_t(4) << 20;

  JsonSchemaCompiler(const json& doc, std::string prefix);

  // Compiles the whole document; returns the root rule's name.
  std::string compile_root();

  // Every rule, the root first, one a line.
  std::string text() const;

  [[noreturn]] static void fail(const std::string& path, const std::string& what);
  static std::string child_path(const std::string& path, const std::string& key);
  // A rule name from schema text: letters, digits and single dashes, at most 40 characters.
  static std::string sanitize(const std::string& s);
  static std::string join_local(const std::string& parent, const std::string& name) {
    return parent.empty() ? name : parent + "-" + name;
  }

 private:
  std::string qualify(const std::string& local) const { return prefix_.empty() ? local : prefix_ + "-" + local; }

  // Defines a rule for `body` named after `local` (suffixed -2, -3, ... if taken by another
  // body), or returns the body itself when it is already a single rule name or belongs to
  // `inline_local_` (the rule being defined is the root's or a $ref's own).
  std::string named(const std::string& local, const std::string& body);

  void define(const std::string& name, const std::string& body);

  // The shared rules for plain JSON, defined on first use.
  std::string primitive(const std::string& id);

  std::string space() { return primitive("space"); }

  void take_repetition(size_t min, size_t max, const std::string& path);

  size_t count(const json& s, const char* key, const std::string& path, size_t fallback);

  const json& resolve(const std::string& ref, const std::string& path);

  // The rule for a $ref's target, compiled on first use (so recursion refers to it).
  std::string ref_rule(const json& ref_value, const std::string& path, size_t depth);

  // A $ref reaching itself with nothing read in between would be left recursion.
  void check_ref_cycles() const;

  // The term (a rule name or literal) for a value of schema `s`.
  std::string compile(const json& s, const std::string& local, const std::string& path, size_t depth);

  static bool has_type_keywords(const json& s);

  std::string compile_union(const json& s, const std::string& local, const std::string& path, size_t depth);

  std::vector<std::string> types_of(const json& s, const std::string& path) const;

  std::string literals(const json& s, const std::vector<std::string>& types, const std::string& path);

  // The body for the values of one type `t` of schema `s`.
  std::string typed(const json& s, const std::string& t, const std::string& local, const std::string& path,
                    size_t depth);

  // One bound as (value, exclusive): `minimum` with a draft-4 boolean exclusiveMinimum, or a
  // numeric exclusiveMinimum, whichever is stricter.
  struct Bound {
    const json* value = nullptr;
    bool exclusive = false;
  };
  Bound bound(const json& s, const char* inclusive_key, const char* exclusive_key, bool lower,
              const std::string& path) const;

  // engine/grammar/json_schema_values.cpp
  std::string integer_body(const json& s, const std::string& path);

  std::string number_body(const json& s, const std::string& path);

  std::string string_body(const json& s, const std::string& path);

  std::string array_body(const json& s, const std::string& local, const std::string& path, size_t depth);

  // engine/grammar/json_schema_objects.cpp
  std::string object_body(const json& s, const std::string& local, const std::string& path, size_t depth);
  std::string extra_key(const std::vector<std::string>& declared, const std::string& local);

  const json& doc_;
  std::string prefix_;
  std::unordered_map<std::string, std::string> taken_;  // rule name -> body
  std::vector<std::string> order_;
  std::set<std::string> reserved_;
  std::unordered_map<std::string, std::string> ref_rules_;
  std::string inline_local_;  // local name whose body goes into the rule being defined
  std::string current_ref_;   // the $ref whose rule is being written, while nothing was read
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> ref_edges_;  // ref -> (ref, path)
  size_t subschemas_ = 0;                // compiled so far, against kSchemaMaxSubschemas
  size_t budget_ = kMaxTotalRepetition;  // repetition left (see kMaxTotalRepetition)
  size_t bytes_ = 0;                     // of rule text so far
};

}  // namespace pagoda::grammar
