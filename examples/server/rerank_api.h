#pragma once
// POST /v1/rerank, /rerank, /v1/reranking and /reranking: a reranker's relevance scores of
// documents to a query, in the shape llama-server, Jina and Cohere share. The body holds `query`
// (a non-empty string), `documents` (strings, or objects with a string "text" as Cohere and Jina
// accept; at most kMaxRerankDocuments), optional `top_n` (only the best n) and
// `return_documents`, and `model` as /v1/embeddings reads it. The answer is {"id", "model",
// "object": "list", "usage", "results": [{"index", "relevance_score"[, "document": {"text"}]}]},
// best first, ties in document order. Scores are the model's raw outputs (logits), or a decoder
// reranker's P("yes") (Qwen3-Reranker), as llama-server gives them.
//
// Hugging Face TEI's shape is accepted too, as llama-server accepts it: `texts` instead of
// `documents` (strings only), `return_text`, and `raw_scores` (false by default, so scores go
// through a sigmoid as TEI's do, except a decoder reranker's probabilities); the answer is then a bare array of
// {"index", "score"[, "text"]}. TEI's `truncate` works in either shape: a pair longer than the context is cut to fit
// (EmbeddingParams::truncate: the document's end goes, the closing [SEP] stays) instead of
// refused; `truncation_direction` may only be "right".
//
// Each document is one embedding request on the engine (Engine::rerank_tokens' pair, Pooling::Rank),
// batched with the other traffic; a client that hangs up cancels them.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/server/http_request.h"
#include "examples/server/http_response.h"
#include "examples/server/model_names.h"
#include "pagoda/engine.h"

namespace pagoda::server {

// As many documents as /v1/embeddings takes inputs.
inline constexpr size_t kMaxRerankDocuments = 2048;

// A rerank body, checked.
struct RerankQuery {
  std::string query;
  std::vector<std::string> documents;
  size_t top_n = 0;               // results to answer with: at most documents.size()
  bool return_documents = false;  // TEI: return_text
  bool tei = false;               // TEI's shape: `texts` in, a bare array out
  bool sigmoid = false;           // TEI without raw_scores: scores mapped to (0, 1)
  bool truncate = false;          // cut a pair longer than the context instead of refusing it
};

// `body` read as a rerank request. Throws ApiError 400 naming what is wrong: not an object, a
// missing, non-string or empty query, no documents, both `documents` and `texts`, a document
// that is neither a string nor {"text": string}, more than kMaxRerankDocuments, a top_n that is
// not a positive integer, a return_documents / return_text / raw_scores / truncate that is not a
// bool, a truncation_direction other than "right".
RerankQuery parse_rerank_query(const nlohmann::ordered_json& body);

// The answer to `q` given each document's score (in document order) and the tokens fed in
// all: sorted best first (a NaN score last), cut to top_n. `id` and `model` name the response
// (not in TEI's shape, which is the bare array).
nlohmann::ordered_json rerank_answer(const RerankQuery& q, const std::vector<float>& scores, int64_t prompt_tokens,
                                     const std::string& id, const std::string& model);

// Whether the model's pooling is rank (a reranker: bge-reranker, jina-reranker), as Engine::rerank
// requires.
bool is_reranker(const Engine& engine);

// The whole request: 200 with rerank_answer, or 499 when the client left. Throws ApiError for a
// bad body or a model that is not a reranker (400), an unknown model (404), an engine that shut
// down (503: `shutting_down` is the server's flag) or failed (500). `id` names the response.
HttpResponse rerank(const HttpRequest& req, Engine& engine, const ModelNames& names,
                    const std::atomic<bool>& shutting_down, const std::string& id);

}  // namespace pagoda::server
