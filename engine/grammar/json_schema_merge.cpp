// allOf: first flatten the parts (nested allOf, $ref targets, sibling keywords), then
// distribute any anyOf/oneOf, then combine keyword by keyword.

#include "engine/grammar/json_schema_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "engine/grammar/json_schema.h"
#include "engine/util/stack_room.h"
#include "pagoda/error.h"

namespace pagoda::grammar {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("json schema: " + (path.empty() ? std::string("/") : path) + ": " + what);
}

// Keywords that say nothing about which values are valid.
bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",     "description", "default",     "examples",         "$comment",
      "$schema",   "$id",         "$anchor",     "deprecated",       "readOnly",
      "writeOnly", "$defs",       "definitions", "contentMediaType", "contentEncoding"};
  return kAnnotations.count(k) != 0 || k.rfind("x-", 0) == 0;
}

class Merger {
 public:
  Merger(const RefResolver& resolve, size_t& count) : resolve_(resolve), count_(count) {}

  // `depth`: the anyOf/oneOf distributed on the way here (a $ref cycle through them would
  // otherwise recurse until kSchemaMaxSubschemas).
  OrderedJson merge(const std::vector<OrderedJson>& parts, const std::string& path, size_t depth) {
    if (++count_ > kSchemaMaxSubschemas)
      fail(path, "allOf expands to more than " + std::to_string(kSchemaMaxSubschemas) + " subschemas");
    if (depth > kSchemaMaxDepth)
      fail(path, "allOf distributes anyOf/oneOf nested deeper than " + std::to_string(kSchemaMaxDepth));
    if (stack_nearly_full()) fail(path, "allOf nested too deeply for this thread's stack");
    std::vector<OrderedJson> flat;
    std::vector<std::string> active;
    for (const OrderedJson& p : parts) flatten(p, path, active, flat, 0);
    // Distribute the first anyOf/oneOf: allOf(A, anyOf(B1, B2)) = anyOf(allOf(A, B1), allOf(A, B2)).
    for (size_t i = 0; i < flat.size(); ++i) {
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!flat[i].contains(key)) continue;
        const OrderedJson& branches = flat[i][key];
        if (!branches.is_array() || branches.empty()) fail(path, std::string(key) + " must be a non-empty array");
        OrderedJson rest = flat[i];
        rest.erase(key);
        OrderedJson alternatives = OrderedJson::array();
        for (const OrderedJson& branch : branches) {
          std::vector<OrderedJson> next = flat;
          next[i] = rest;
          next.push_back(branch);
          alternatives.push_back(merge(next, path, depth + 1));
        }
        return OrderedJson{{"anyOf", std::move(alternatives)}};
      }
    }
    return combine(flat, path);
  }

 private:
  void flatten(const OrderedJson& s, const std::string& path, std::vector<std::string>& active,
               std::vector<OrderedJson>& out, size_t depth) {
    if (depth > kSchemaMaxDepth) fail(path, "allOf and $ref nested deeper than " + std::to_string(kSchemaMaxDepth));
    if (stack_nearly_full()) fail(path, "allOf nested too deeply for this thread's stack");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "allOf with a false part admits no value");
      return;
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    // Not a copy of `s`: a merged allOf chain may be deeper than any input (see combine).
    OrderedJson rest = OrderedJson::object();
    for (const auto& [k, v] : s.items()) {
      if (k != "$ref" && k != "allOf") rest[k] = v;
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path + "/$ref", "must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      if (std::find(active.begin(), active.end(), ref) != active.end()) {
        fail(path + "/$ref", "'" + ref + "' is merged into itself (a $ref cycle through allOf)");
      }
      active.push_back(ref);
      flatten(resolve_(ref, path + "/$ref"), ref.substr(1), active, out, depth + 1);
      active.pop_back();
    }
    if (s.contains("allOf")) {
      const OrderedJson& parts = s["allOf"];
      if (!parts.is_array() || parts.empty()) fail(path + "/allOf", "must be a non-empty array");
      for (size_t i = 0; i < parts.size(); ++i)
        flatten(parts[i], path + "/allOf/" + std::to_string(i), active, out, depth + 1);
    }
    out.push_back(std::move(rest));
  }

  static std::vector<std::string> types_of(const OrderedJson& t, const std::string& path) {
    std::vector<std::string> types;
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array()) {
      for (const OrderedJson& x : t) {
        if (!x.is_string()) fail(path + "/type", "must be a string or an array of strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      fail(path + "/type", "must be a string or an array of strings");
    }
    return types;
  }

  static OrderedJson intersect_types(const OrderedJson& a, const OrderedJson& b, const std::string& path) {
    const std::vector<std::string> ta = types_of(a, path), tb = types_of(b, path);
    auto has = [](const std::vector<std::string>& v, const std::string& t) {
      return std::find(v.begin(), v.end(), t) != v.end();
    };
    OrderedJson out = OrderedJson::array();
    for (const std::string& t : ta) {
      if (has(tb, t) || (t == "integer" && has(tb, "number"))) {
        out.push_back(t);
      } else if (t == "number" && has(tb, "integer")) {
        out.push_back("integer");
      }
    }
    if (out.empty()) fail(path + "/allOf", "the parts' types have nothing in common");
    return out.size() == 1 ? out[0] : out;
  }

  static OrderedJson all_of(OrderedJson a, const OrderedJson& b) {
    OrderedJson parts = OrderedJson::array();
    parts.push_back(std::move(a));
    parts.push_back(b);
    return OrderedJson{{"allOf", std::move(parts)}};
  }

  // allOf(have, v) in place. Each part merged into one keyword nests the result one level
  // deeper; past kSchemaMaxDepth parts, copies and comparisons of it would recurse unboundedly
  // (and compiling it would fail anyway), so that is refused here.
  static void nest(OrderedJson& have, const OrderedJson& v, size_t& merged, const std::string& what,
                   const std::string& path) {
    if (++merged > kSchemaMaxDepth)
      fail(path + "/allOf", "more than " + std::to_string(kSchemaMaxDepth) + " parts merge into one " + what);
    have = all_of(std::move(have), v);
  }

  OrderedJson combine(const std::vector<OrderedJson>& parts, const std::string& path) {
    static const std::set<std::string> kLower = {"minimum", "minLength", "minItems", "minProperties"};
    static const std::set<std::string> kUpper = {"maximum", "maxLength", "maxItems", "maxProperties"};
    OrderedJson r = OrderedJson::object();
    std::map<std::string, size_t> merged;  // "items", "properties/name": parts nested into it
    for (const OrderedJson& part : parts) {
      for (const auto& [k, v] : part.items()) {
        if (is_annotation(k)) continue;
        if (!r.contains(k)) {
          r[k] = v;
          continue;
        }
        OrderedJson& have = r[k];
        if (have == v) continue;
        if (k == "type") {
          have = intersect_types(have, v, path);
        } else if (k == "properties") {
          if (!v.is_object() || !have.is_object()) fail(path + "/allOf", "properties must be an object");
          for (const auto& [name, schema] : v.items()) {
            if (have.contains(name)) {
              nest(have[name], schema, merged["properties/" + name], "property '" + name + "'", path);
            } else {
              have[name] = schema;
            }
          }
        } else if (k == "required") {
          if (!v.is_array() || !have.is_array()) fail(path + "/allOf", "required must be an array");
          for (const OrderedJson& name : v) {
            if (std::find(have.begin(), have.end(), name) == have.end()) have.push_back(name);
          }
        } else if (k == "items" || k == "additionalItems") {
          nest(have, v, merged[k], "'" + k + "'", path);
        } else if (k == "additionalProperties") {
          // Applied below, per part, against the properties the other parts declare.
        } else if (kLower.count(k) || kUpper.count(k) || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
          if (!have.is_number() || !v.is_number()) fail(path + "/allOf", "cannot merge two different '" + k + "'");
          const bool lower = kLower.count(k) || k == "exclusiveMinimum";
          if (lower ? v > have : v < have) have = v;
        } else if (k == "enum") {
          if (!have.is_array() || !v.is_array()) fail(path + "/allOf", "enum must be an array");
          OrderedJson both = OrderedJson::array();
          for (const OrderedJson& x : have) {
            if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
          }
          if (both.empty()) fail(path + "/allOf", "the parts' enums have no value in common");
          have = std::move(both);
        } else if (k == "nullable") {
          have = have.is_boolean() && v.is_boolean() && have.get<bool>() && v.get<bool>();
        } else {
          fail(path + "/allOf", "cannot merge two different '" + k + "'");
        }
      }
    }
    restrict_additional(parts, r, path);
    return r;
  }

  // A part's additionalProperties covers every property it does not declare itself,
  // including those the other parts add.
  static void restrict_additional(const std::vector<OrderedJson>& parts, OrderedJson& r, const std::string& path) {
    std::vector<const OrderedJson*> limits;
    for (const OrderedJson& part : parts) {
      if (!part.contains("additionalProperties")) continue;
      const OrderedJson& ap = part["additionalProperties"];
      if (ap.is_boolean() && ap.get<bool>()) continue;
      limits.push_back(&part);
    }
    if (limits.empty()) return;
    // Each limit nests the properties and additionalProperties one level deeper (see nest).
    if (limits.size() > kSchemaMaxDepth) {
      fail(path + "/allOf", "more than " + std::to_string(kSchemaMaxDepth) + " parts restrict additionalProperties");
    }
    OrderedJson merged_ap = true;
    for (const OrderedJson* part : limits) {
      const OrderedJson& ap = (*part)["additionalProperties"];
      merged_ap = merged_ap.is_boolean() && merged_ap.get<bool>() ? ap
                  : ap.is_boolean() || merged_ap.is_boolean()     ? OrderedJson(false)
                                                                  : all_of(merged_ap, ap);
      if (!r.contains("properties")) continue;
      const OrderedJson own = part->contains("properties") ? (*part)["properties"] : OrderedJson::object();
      OrderedJson kept = OrderedJson::object();
      for (const auto& [name, schema] : r["properties"].items()) {
        if (own.contains(name)) {
          kept[name] = schema;
        } else if (ap.is_object()) {
          kept[name] = all_of(schema, ap);
        } else if (r.contains("required") &&
                   std::find(r["required"].begin(), r["required"].end(), name) != r["required"].end()) {
          fail(path + "/allOf", "required property '" + name + "' is excluded by another part's additionalProperties");
        }
      }
      r["properties"] = std::move(kept);
    }
    r["additionalProperties"] = merged_ap;
  }

  const RefResolver& resolve_;
  size_t& count_;
};

}  // namespace

OrderedJson merge_all_of(const OrderedJson& schema, const std::string& path, const RefResolver& resolve,
                         size_t& count) {
  return Merger(resolve, count).merge({schema}, path, 0);
}

}  // namespace pagoda::grammar
