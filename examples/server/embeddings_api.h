#pragma once
// POST /v1/embeddings in OpenAI's shape: `input` is a string, a list of strings, a list of token
// ids or a list of such lists (at most kMaxEmbeddingInputs, as OpenAI allows); `model` names the
// base model or a loaded adapter; `encoding_format` is "float" or "base64" (the little-endian
// float32 bytes, as OpenAI sends them). `dimensions` is refused: it asks for Matryoshka
// truncation, which a model must be trained for. Each input is one embedding request on the
// engine (Request::embedding, the model's pooling, unit length), batched with the other traffic;
// a client that hangs up cancels them. A reranker's model is refused (400): its pooling gives a score,
// not a vector (POST /v1/rerank).

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "examples/server/http_request.h"
#include "examples/server/http_response.h"
#include "examples/server/model_names.h"
#include "pagoda/engine.h"

namespace pagoda::server {

inline constexpr size_t kMaxEmbeddingInputs = 2048;

// The answer to one request: 200 with {"object": "list", "data": [{"object": "embedding",
// "index", "embedding"}], "model", "usage"}, or 499 when the client left. Throws ApiError for a
// bad body (400), an unknown model (404), or an engine that shut down (503: `shutting_down` is
// the server's flag, which tells a refusal at shutdown from a bad input) or failed (500).
HttpResponse embeddings(const HttpRequest& req, Engine& engine, const ModelNames& names,
                        const std::atomic<bool>& shutting_down);

// `bytes` in standard base64 (RFC 4648, with padding).
std::string base64(std::string_view bytes);

}  // namespace pagoda::server
