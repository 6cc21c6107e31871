#pragma once
// JSON Schema compiled to a GBNF grammar (engine/grammar/gbnf_parser.h), so decoding can be
// constrained to documents that validate: `response_format: json_schema` and tool calls whose
// arguments must fit a function's `parameters`.
//
// Every document the grammar admits validates against the schema; the grammar may admit fewer
// documents than the schema does (generation needs soundness, not completeness):
//  - Values are compact JSON with bounded whitespace between tokens (one space, or a newline
//    and at most 20 spaces or tabs), none before or after the document.
//  - Objects write their properties in the schema's order, the optional ones skippable; extra
//    keys come last and only when `additionalProperties` is true or a schema (an absent
//    `additionalProperties` means none, as in llama.cpp, unless the object declares no
//    `properties` at all); extra keys never equal a declared property and use no escapes.
//  - Strings never contain escapes of surrogates (\uD800-\uDFFF), so lengths count exactly.
//  - Numbers have at most 16 integer, 16 fraction and 2 exponent digits. Integer bounds are
//    exact. Number bounds hold at integer granularity: a fraction (1 to 6 digits) is only
//    written inside a whole unit interval within the bounds, and no exponent.
//  - `oneOf` is compiled as `anyOf` (its branches should not overlap); `enum`/`const` values
//    are written as their compact JSON text and checked only against a sibling `type`.
//  - Absent `type`: the types its keywords imply (`properties` an object, `minLength` a
//    string, ...), or any value when none do. Unknown `format`s are plain strings, and so is
//    a `format` beside a `pattern`: the pattern is written (an annotation in 2020-12, as
//    llama.cpp and xgrammar read it; zod writes both, its pattern the stricter).
// Supported: type (and type arrays, `nullable`), properties, required, additionalProperties,
// minProperties/maxProperties when the shape already satisfies them, enum, const, items,
// prefixItems, additionalItems, minItems, maxItems, minLength, maxLength, pattern (a regex
// subset: literals, classes, `.`, \d \w \s, groups, alternation, ? * + {m,n}, ^ $ at the
// ends), format (date, time, date-time, uuid, email, ipv4), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, anyOf, oneOf, allOf (merged), $ref to local pointers
// (`#`, `#/$defs/...`, `#/definitions/...`; recursion must pass through an object or array),
// propertyNames as zod writes records (`{"type": "string"}`, which every key satisfies, or an
// enum/const of keys on an object without `properties`: those keys, valued by
// `additionalProperties`, and no others).
// Annotations (title, description, default, examples, ...) are ignored. The one validation
// keyword read but not enforced is uniqueItems (no context-free rule says it; refusing it would
// refuse every set-valued field, as pydantic writes them): an array may repeat an item.
//
// Refused with pagoda::Error naming the schema path (`json schema: /properties/age/minimum:
// ...`): malformed schemas, validation keywords it cannot honour (not, if, patternProperties,
// multipleOf, other propertyNames, ...), a pattern together with a length, counts
// (minLength, maxLength, minItems, maxItems, regex repetitions) above kSchemaMaxRepetition or
// adding up to more than 40000, schema text nested deeper than kMaxJsonDepth
// (engine/util/json_depth.h: `json schema: JSON nested deeper than 128 levels`), schemas
// nested deeper than kSchemaMaxDepth (subschemas, $ref chains, allOf merging more parts into
// one keyword) or needing more than kSchemaMaxSubschemas compiled subschemas (an allOf over
// $refs can otherwise grow exponentially), patterns nested deeper than kRegexMaxNesting, and
// empty results (`false`, no integer in the bounds, an enum with no value of the type). Every
// recursion is bounded by these and checks the stack left (engine/util/stack_room.h: "nested
// too deeply for this thread's stack" on a thread whose stack is too small for a schema within
// the limits), so no schema can overflow the stack.

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda::grammar {

inline constexpr size_t kSchemaMaxRepetition = 1000;
inline constexpr size_t kSchemaMaxDepth = 64;
inline constexpr size_t kSchemaMaxSubschemas = 20000;

// One schema's rules, for a grammar that embeds the schema's values in a larger text, e.g.
//   root ::= "{\"name\": \"get_weather\", \"arguments\": " get-weather-args "}"
// followed by json_schema_rules(parameters, "get-weather-args").rules.
struct JsonSchemaRules {
  std::string root;   // the rule matching one value of the schema: the prefix itself
  std::string rules;  // GBNF rule definitions, one a line, every name `prefix` or `prefix-...`
};

// `prefix` must be a GBNF rule name (letters, digits, '-'); two schemas with different
// prefixes (neither a prefix of the other followed by '-') can share one grammar.
JsonSchemaRules json_schema_rules(std::string_view schema_json, std::string_view prefix);

// A whole grammar whose `root` is one value of the schema; other rule names come from the
// schema (property names, $defs) so the grammar reads well.
std::string json_schema_to_gbnf(std::string_view schema_json);

// Any JSON object (`response_format: json_object`), with the same bounded whitespace.
std::string any_json_gbnf();

}  // namespace pagoda::grammar
