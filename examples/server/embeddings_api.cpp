#include "examples/server/embeddings_api.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/choices.h"
#include "examples/server/json_body.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "examples/server/rerank_api.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// A list of token ids, or nullopt when `v` is not one (an id out of int32 is refused here; the
// engine checks the vocabulary).
std::optional<std::vector<int32_t>> token_ids(const ordered_json& v) {
  if (!v.is_array() || v.empty()) return std::nullopt;
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const ordered_json& id : v) {
    if (!id.is_number_integer()) return std::nullopt;
    const auto n = id.get<int64_t>();
    if (n < 0 || n > std::numeric_limits<int32_t>::max())
      throw bad_request("'input' holds token id " + std::to_string(n) + ", which is outside the vocabulary");
    ids.push_back(int32_t(n));
  }
  return ids;
}

// OpenAI's four shapes of `input`, as the engine's inputs.
std::vector<EmbeddingInput> inputs_of(const ordered_json& body) {
  if (!body.contains("input")) throw bad_request("'input' is required");
  const ordered_json& input = body["input"];
  const std::string shapes = "a string, a list of strings, a list of token ids or a list of lists of token ids";
  if (input.is_string()) return {EmbeddingInput(input.get<std::string>())};
  if (!input.is_array()) throw bad_request("'input' must be " + shapes);
  if (input.empty()) throw bad_request("'input' must not be an empty list");
  if (auto ids = token_ids(input)) return {EmbeddingInput(std::move(*ids))};
  if (input.size() > kMaxEmbeddingInputs) {
    throw bad_request("'input' has " + std::to_string(input.size()) + " items; at most " +
                      std::to_string(kMaxEmbeddingInputs) + " are allowed");
  }
  std::vector<EmbeddingInput> out;
  out.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    if (input[i].is_string()) {
      out.emplace_back(input[i].get<std::string>());
    } else if (auto ids = token_ids(input[i])) {
      out.emplace_back(std::move(*ids));
    } else {
      throw bad_request("'input' item " + std::to_string(i) + " must be a string or a non-empty list of token ids");
    }
  }
  return out;
}

// The vector in the response's encoding: a list of numbers, or base64 of little-endian float32.
json encoded(const std::vector<float>& v, bool as_base64) {
  if (!as_base64) return v;
  std::string bytes(v.size() * sizeof(float), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    auto bits = std::bit_cast<uint32_t>(v[i]);
    for (size_t b = 0; b < 4; ++b) bytes[i * 4 + b] = char((bits >> (8 * b)) & 0xFF);
  }
  return base64(bytes);
}

// Whether the model's own pooling is none (a GGUF pooling_type of 0).
bool per_token(const Engine& engine) {
  try {
    return engine.model_pooling() == Pooling::None;
  } catch (const Error&) {
    return false;  // a pooling pagoda cannot give: the request names it when submitted
  }
}

}  // namespace

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t j = 0; j < 3; ++j) chunk = (chunk << 8) | (j < n ? uint8_t(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(chunk >> (18 - 6 * j)) & 0x3F] : '=';
  }
  return out;
}

HttpResponse embeddings(const HttpRequest& req, Engine& engine, const ModelNames& names,
                        const std::atomic<bool>& shutting_down) {
  const ApiError shutting_down_error(503, "the server is shutting down", "server_error", "service_unavailable");
  const ordered_json body = parse_request_body(req.body);
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    throw bad_request("'dimensions' is not supported: this model's embeddings cannot be shortened");
  }
  bool as_base64 = false;
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const ordered_json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      throw bad_request("'encoding_format' must be \"float\" or \"base64\"");
    as_base64 = f == "base64";
  }
  const ServedModel served = served_model(body, names);
  const std::vector<EmbeddingInput> inputs = inputs_of(body);
  if (is_reranker(engine)) {
    // Its pooling gives one score per input, not a vector to compare (llama-server refuses too).
    throw bad_request(
        "the model is a reranker (pooling rank): it scores a query against documents at /v1/rerank, "
        "and gives no embedding vectors");
  }
  if (per_token(engine)) {
    // One vector per token has no place in OpenAI's answer (llama-server refuses it too).
    throw bad_request(
        "the model's pooling is none (one vector per token), which /v1/embeddings cannot answer: OpenAI's "
        "embeddings are one vector per input");
  }

  std::vector<RequestHandle> handles;
  auto cancel_all = [&] {
    for (RequestHandle& h : handles) h.cancel();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    Request r;
    r.embedding = EmbeddingParams{};
    r.adapter = served.adapter;
    if (inputs[i].ids.empty()) r.prompt = inputs[i].text;
    else r.prompt_ids = inputs[i].ids;
    try {
      handles.push_back(engine.submit(std::move(r)));
    } catch (const Error& e) {
      cancel_all();  // what was queued before this input goes (every future still resolves)
      if (shutting_down.load()) throw shutting_down_error;
      throw bad_request(inputs.size() > 1 ? "'input' item " + std::to_string(i) + ": " + e.what() : e.what());
    }
  }

  // A client that hangs up while its embeddings are computed cancels them.
  const std::optional<std::vector<Completion>> done = await_completions(handles, req.client_gone);
  if (!done) return HttpResponse::json(499, dump_json(ApiError(499, "the client closed the connection").body()));
  json data = json::array();
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < done->size(); ++i) {
    const Completion& c = (*done)[i];
    if (c.finish_reason == FinishReason::Cancelled) throw shutting_down_error;
    if (c.finish_reason == FinishReason::Error || c.embedding.empty()) {
      throw ApiError(500, c.error.empty() ? "the embedding was not computed" : c.error, "server_error");
    }
    prompt_tokens += c.prompt_tokens;
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", encoded(c.embedding, as_base64)}});
  }
  const json answer = {{"object", "list"},
                       {"data", std::move(data)},
                       {"model", served.name},
                       {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  return HttpResponse::json(200, dump_json(answer));
}

}  // namespace pagoda::server
