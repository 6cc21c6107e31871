#include "examples/server/tokenize_api.h"

#include <cstdint>
#include <vector>

#include "examples/server/api_error.h"
#include "examples/server/json_body.h"

namespace pagoda::server {

namespace {

using json = nlohmann::ordered_json;

bool flag(const json& body, const char* name, bool fallback) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw bad_request(std::string("'") + name + "' must be a boolean");
  return it->get<bool>();
}

json object_body(const std::string& text) {
  json body = parse_request_body(text);
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  return body;
}

// A piece as text when it is whole UTF-8 (which nlohmann checks as it writes), else its bytes.
json piece_json(const std::string& piece) {
  try {
    (void)json(piece).dump();
    return piece;
  } catch (const json::type_error&) {
  }
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return bytes;
}

}  // namespace

json tokenize_json(const std::string& text, const Engine& engine) {
  const json body = object_body(text);
  const char* name = body.contains("content") ? "content" : "prompt";
  auto it = body.find(name);
  if (it == body.end() || !it->is_string()) throw bad_request("'content' must be a string");
  // vLLM's add_special_tokens is the same switch as llama-server's add_special.
  const bool add_special = flag(body, "add_special", flag(body, "add_special_tokens", false));
  const std::vector<int32_t> ids =
      engine.tokenize(it->get<std::string>(), add_special && engine.add_bos(), flag(body, "parse_special", true));
  json tokens = json::array();
  if (flag(body, "with_pieces", false)) {
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", piece_json(engine.token_text(id))}});
  } else {
    tokens = ids;
  }
  return {{"tokens", std::move(tokens)}, {"count", ids.size()}, {"max_model_len", engine.context_length()}};
}

json detokenize_json(const std::string& text, const Engine& engine) {
  const json body = object_body(text);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) throw bad_request("'tokens' must be a list of token ids");
  std::vector<int32_t> ids;
  for (const json& id : *it) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= engine.vocab_size()) {
      throw bad_request("'tokens' holds " + id.dump() + ", not a token id of the vocabulary (0.." +
                        std::to_string(engine.vocab_size() - 1) + ")");
    }
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  const std::string content = engine.detokenize(ids);
  return {{"content", content}, {"prompt", content}};
}

}  // namespace pagoda::server
