#pragma once
// allOf for engine/grammar/json_schema: the parts of an allOf (and a $ref with sibling
// keywords) merged into one schema the compiler can write, internal to engine/grammar.

#include <cstddef>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda::grammar {

using OrderedJson = nlohmann::ordered_json;

// Finds a local $ref's target; throws pagoda::Error naming `path` when it cannot.
using RefResolver = std::function<const OrderedJson&(const std::string& ref, const std::string& path)>;

// One schema whose values all satisfy every part of `schema`'s allOf (and its other
// keywords, and the target of a $ref beside them): $refs at the top of a part are inlined,
// anyOf/oneOf inside a part are distributed over the rest (the result is then an anyOf of
// merged schemas), and keywords combine (types intersect, properties merge with allOf of
// both, bounds tighten, enums intersect, additionalProperties of a part restricts the
// properties the others add). Keywords that differ and cannot combine are an error naming
// `path`. `count` is charged one per merged part, failing past kSchemaMaxSubschemas.
OrderedJson merge_all_of(const OrderedJson& schema, const std::string& path, const RefResolver& resolve, size_t& count);

}  // namespace pagoda::grammar
