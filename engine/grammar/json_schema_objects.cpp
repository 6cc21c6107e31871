// Objects: the properties in the schema's order, each optional one skippable, then extra
// keys. With optional properties the members become a chain of rules: `from-K` (nothing
// written yet, the members from K on) and `rest-K` (something written, so each member starts
// with a comma); a member's alternatives begin with different keys, so the chain is
// unambiguous after a key's first differing character.

#include <algorithm>
#include <cstdint>

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_compiler.h"

namespace pagoda::grammar {

std::string JsonSchemaCompiler::object_body(const json& s, const std::string& local, const std::string& path,
                                            size_t depth) {
  struct Member {
    std::string key;
    std::string kv;  // the rule for `"key": value`
    bool required;
  };
  std::vector<std::string> required;
  if (s.contains("required")) {
    const json& r = s["required"];
    if (!r.is_array()) fail(child_path(path, "required"), "must be an array of property names");
    for (const json& name : r) {
      if (!name.is_string()) fail(child_path(path, "required"), "must be an array of property names");
      if (std::find(required.begin(), required.end(), name.get<std::string>()) == required.end())
        required.push_back(name.get<std::string>());
    }
  }
  const json none = json::object();
  const json& properties = s.contains("properties") ? s["properties"] : none;
  if (!properties.is_object()) fail(child_path(path, "properties"), "must be an object");
  // Required names without a property schema may hold any value; they go last.
  std::vector<std::pair<std::string, const json*>> declared;
  const json any = true;
  for (const auto& [key, schema] : properties.items()) declared.emplace_back(key, &schema);
  for (const std::string& key : required) {
    if (!properties.contains(key)) declared.emplace_back(key, &any);
  }
  // Extra keys: as additionalProperties says; absent, only for an object that declares nothing.
  const json* extra = nullptr;
  if (s.contains("additionalProperties")) {
    const json& ap = s["additionalProperties"];
    if (!ap.is_boolean() && !ap.is_object())
      fail(child_path(path, "additionalProperties"), "must be a boolean or a schema");
    if (!(ap.is_boolean() && !ap.get<bool>())) extra = &ap;
  } else if (declared.empty()) {
    extra = &any;
  }
  const size_t min_props = count(s, "minProperties", path, 0), max_props = count(s, "maxProperties", path, kUnbounded);
  if (min_props > required.size())
    fail(child_path(path, "minProperties"), "more than the required properties is not supported");
  if (max_props != kUnbounded && (extra || declared.size() > max_props)) {
    fail(child_path(path, "maxProperties"), "fewer than the properties allowed is not supported");
  }

  const std::string sp = space(), sep = sp + " \",\" " + sp, colon = sp + " \":\" " + sp;
  std::vector<Member> members;
  std::vector<std::string> names;
  for (const auto& [key, schema] : declared) {
    const std::string value_local = join_local(local, sanitize(key));
    const std::string value = compile(*schema, value_local, child_path(child_path(path, "properties"), key), depth + 1);
    const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
    members.push_back(
        {key, named(value_local + "-kv", gbnf_literal(json(key).dump()) + " " + colon + " " + value), is_required});
    names.push_back(key);
  }
  std::string extra_kv;
  if (extra) {
    const std::string key = names.empty() ? primitive("string") : extra_key(names, local);
    const std::string value =
        compile(*extra, join_local(local, "additional"), child_path(path, "additionalProperties"), depth + 1);
    extra_kv = named(join_local(local, "additional-kv"), key + " " + colon + " " + value);
  }

  const size_t n = members.size();
  const bool all_required = std::all_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
  if (all_required) {
    std::string body = "\"{\"";
    for (size_t i = 0; i < n; ++i) body += " " + (i == 0 ? sp : sep) + " " + members[i].kv;
    if (extra) {
      body += n == 0 ? " (" + sp + " " + extra_kv + " (" + sep + " " + extra_kv + ")*)?"
                     : " (" + sep + " " + extra_kv + ")*";
    }
    return body + " " + sp + " \"}\"";
  }
  // rest[i]: members i.. after something was written; from[i]: members i.. with nothing yet.
  std::vector<std::string> rest(n + 1), from(n + 1);
  std::vector<bool> from_used(n + 1, false);  // from[0], and from[i + 1] after an optional member i
  from_used[0] = true;
  for (size_t i = 0; i < n; ++i) from_used[i + 1] = from_used[i] && !members[i].required;
  rest[n] = extra ? "(" + sep + " " + extra_kv + ")*" : "";
  from[n] = extra ? "(" + sp + " " + extra_kv + " (" + sep + " " + extra_kv + ")*)?" : "";
  for (size_t i = n; i-- > 0;) {
    const Member& m = members[i];
    const std::string key_local = join_local(local, sanitize(m.key));
    const std::string then = rest[i + 1].empty() ? "" : " " + rest[i + 1];
    std::string rest_body = sep + " " + m.kv + then;
    std::string from_body = sp + " " + m.kv + then;
    if (!m.required) {
      rest_body = rest[i + 1].empty() ? "(" + rest_body + ")?" : rest_body + " | " + rest[i + 1];
      from_body = from[i + 1].empty() ? "(" + from_body + ")?" : from_body + " | " + from[i + 1];
    }
    if (i > 0) rest[i] = named(key_local + "-rest", rest_body);
    if (from_used[i]) from[i] = named(key_local + "-from", from_body);
  }
  return "\"{\" " + (from[0].empty() ? "" : from[0] + " ") + sp + " \"}\"";
}

// A key that is none of `declared`, with the closing quote: a trie over the declared names,
// each node allowing the quote (unless its prefix is a declared name), the next character of
// a name, or any other character followed by anything. Keys hold no escapes, so the text is
// the key.
std::string JsonSchemaCompiler::extra_key(const std::vector<std::string>& declared, const std::string& local) {
  struct Node {
    std::map<std::string, size_t> next;  // UTF-8 character -> node
    bool is_name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : declared) {
    size_t at = 0;
    for (size_t i = 0; i < name.size();) {
      const auto b = uint8_t(name[i]);
      const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      const std::string c = name.substr(i, len);
      i += len;
      if (b < 0x20 || c == "\"" || c == "\\") {  // never written unescaped: no key can reach it
        at = SIZE_MAX;
        break;
      }
      auto it = trie[at].next.find(c);
      if (it == trie[at].next.end()) {
        it = trie[at].next.emplace(c, trie.size()).first;
        trie.emplace_back();
      }
      at = it->second;
    }
    if (at != SIZE_MAX) trie[at].is_name = true;
  }
  const std::string any_tail = named(join_local(local, "key-tail"), R"([^"\\\x00-\x1F]* "\"")");
  std::vector<std::string> node_rules(trie.size());
  for (size_t i = trie.size(); i-- > 0;) {
    std::vector<std::pair<char32_t, char32_t>> excluded = {{'"', '"'}, {'\\', '\\'}, {0, 0x1F}};
    std::string body = trie[i].is_name ? "" : R"("\"")";
    for (const auto& [c, child] : trie[i].next) {
      body += (body.empty() ? "" : " | ") + gbnf_literal(c) + " " + node_rules[child];
      char32_t cp = uint8_t(c[0]) & (c.size() == 1 ? 0x7F : 0x3F >> (c.size() - 1));
      for (size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (uint8_t(c[k]) & 0x3F);
      excluded.emplace_back(cp, cp);
    }
    std::sort(excluded.begin(), excluded.end());
    body += (body.empty() ? "" : " | ") + gbnf_class(excluded, true) + " " + any_tail;
    node_rules[i] = named(join_local(local, "key-" + std::to_string(i)), body);
  }
  return R"("\"" )" + node_rules[0];
}

}  // namespace pagoda::grammar
