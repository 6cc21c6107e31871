#include "examples/server/rerank_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "examples/server/api_error.h"
#include "examples/server/choices.h"
#include "examples/server/json_body.h"
#include "examples/server/openai_request.h"
#include "examples/server/openai_response.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace {

using nlohmann::ordered_json;

// The member `name` of `body`, or nullptr when it is absent or null (null reads as absent, as
// in the other routes).
const ordered_json* member(const ordered_json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool flag(const ordered_json& body, const char* name) {
  const ordered_json* v = member(body, name);
  if (!v) return false;
  if (!v->is_boolean()) throw bad_request(std::string("'") + name + "' must be true or false");
  return v->get<bool>();
}

// A document's text: a string, or (except in TEI's `texts`) Cohere's and Jina's {"text": ...}.
std::string document_text(const ordered_json& d, const std::string& field, size_t i, bool objects) {
  if (d.is_string()) return d.get<std::string>();
  if (objects && d.is_object()) {
    auto text = d.find("text");
    if (text != d.end() && text->is_string()) return text->get<std::string>();
  }
  throw bad_request("'" + field + "' item " + std::to_string(i) + " must be a string" +
                    (objects ? " or an object with a string 'text'" : ""));
}

// `top_n` as a count, or nullopt when absent; 400 unless it is an integer of at least 1.
std::optional<uint64_t> top_n_of(const ordered_json& body) {
  const ordered_json* v = member(body, "top_n");
  if (!v) return std::nullopt;
  const bool positive =
      v->is_number_unsigned() ? v->get<uint64_t>() > 0 : v->is_number_integer() && v->get<int64_t>() > 0;
  if (!positive) throw bad_request("'top_n' must be a positive integer (the number of best results to return)");
  return v->get<uint64_t>();
}

// Why the model cannot rerank, or nothing when it is a reranker (as Engine::rerank decides).
std::optional<std::string> not_a_reranker(const Engine& engine) {
  try {
    const Pooling pooling = engine.model_pooling();
    if (pooling == Pooling::Rank) return std::nullopt;
    return std::string("the model is not a reranker (its pooling is ") + pooling_name(pooling) +
           ", not rank): it gives embeddings at /v1/embeddings, not relevance scores";
  } catch (const Error& e) {
    return std::string("the model is not a reranker: ") + e.what();
  }
}

// The engine's refusal without its "bad request: " prefix, which the 400 already says.
std::string refusal(const Error& e) {
  const std::string what = e.what(), prefix = "bad request: ";
  return what.starts_with(prefix) ? what.substr(prefix.size()) : what;
}

}  // namespace

bool is_reranker(const Engine& engine) { return !not_a_reranker(engine); }

RerankQuery parse_rerank_query(const ordered_json& body) {
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  RerankQuery q;
  const ordered_json* query = member(body, "query");
  if (!query) throw bad_request("'query' is required: the text to rank the documents against");
  if (!query->is_string()) throw bad_request("'query' must be a string");
  q.query = query->get<std::string>();
  if (q.query.empty()) throw bad_request("'query' must not be empty");

  const ordered_json* documents = member(body, "documents");
  const ordered_json* texts = member(body, "texts");
  if (documents && texts) throw bad_request("give 'documents' or 'texts' (TEI's name for them), not both");
  q.tei = texts != nullptr;
  const std::string field = q.tei ? "texts" : "documents";
  const ordered_json* list = q.tei ? texts : documents;
  const std::string shape = q.tei ? "a list of strings" : "a list of strings or of objects with a string 'text'";
  if (!list) throw bad_request("'documents' is required: " + shape + ", the texts to rank");
  if (!list->is_array()) throw bad_request("'" + field + "' must be " + shape);
  if (list->empty()) throw bad_request("'" + field + "' must not be an empty list");
  if (list->size() > kMaxRerankDocuments) {
    throw bad_request("'" + field + "' has " + std::to_string(list->size()) + " items; at most " +
                      std::to_string(kMaxRerankDocuments) + " are allowed");
  }
  q.documents.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) q.documents.push_back(document_text((*list)[i], field, i, !q.tei));

  q.top_n = std::min<uint64_t>(top_n_of(body).value_or(q.documents.size()), q.documents.size());
  q.return_documents = flag(body, q.tei ? "return_text" : "return_documents");
  q.sigmoid = q.tei && !flag(body, "raw_scores");
  q.truncate = flag(body, "truncate");
  if (const ordered_json* d = member(body, "truncation_direction")) {
    // The engine keeps an input's first tokens: the query, and the document's start.
    const bool right = d->is_string() && (*d == "right" || *d == "Right");
    if (!right)
      throw bad_request(
          "'truncation_direction' may only be \"right\" (a pair keeps its query and its document's start)");
  }
  return q;
}

ordered_json rerank_answer(const RerankQuery& q, const std::vector<float>& scores, int64_t prompt_tokens,
                           const std::string& id, const std::string& model) {
  // NaN compares false with everything, which no sort tolerates: it ranks below every score.
  auto rank = [&](size_t i) { return std::isnan(scores[i]) ? -std::numeric_limits<float>::infinity() : scores[i]; };
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank(a) > rank(b); });
  order.resize(std::min(q.top_n, order.size()));

  ordered_json results = ordered_json::array();
  for (size_t i : order) {
    const float score = q.sigmoid ? float(1.0 / (1.0 + std::exp(-double(scores[i])))) : scores[i];
    ordered_json r = {{"index", i}, {q.tei ? "score" : "relevance_score", score}};
    if (q.return_documents) {
      if (q.tei) r["text"] = q.documents[i];
      else r["document"] = {{"text", q.documents[i]}};
    }
    results.push_back(std::move(r));
  }
  if (q.tei) return results;
  return {{"id", id},
          {"model", model},
          {"object", "list"},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}},
          {"results", std::move(results)}};
}

HttpResponse rerank(const HttpRequest& req, Engine& engine, const ModelNames& names,
                    const std::atomic<bool>& shutting_down, const std::string& id) {
  const ApiError shutting_down_error(503, "the server is shutting down", "server_error", "service_unavailable");
  const ordered_json body = parse_request_body(req.body);
  RerankQuery q = parse_rerank_query(body);
  // A decoder reranker's scores are probabilities already: TEI's sigmoid is for logits.
  if (engine.rerank_probabilities()) q.sigmoid = false;
  const ServedModel served = served_model(body, names);
  if (std::optional<std::string> why = not_a_reranker(engine)) throw bad_request(*why);

  std::vector<RequestHandle> handles;
  handles.reserve(q.documents.size());
  for (size_t i = 0; i < q.documents.size(); ++i) {
    Request r;
    r.embedding = EmbeddingParams{.pooling = Pooling::Rank, .normalize = false, .truncate = q.truncate};
    r.adapter = served.adapter;
    r.prompt_ids = engine.rerank_tokens(q.query, q.documents[i]);
    try {
      handles.push_back(engine.submit(std::move(r)));
    } catch (const Error& e) {
      for (RequestHandle& h : handles) h.cancel();  // what was queued goes (every future still resolves)
      if (shutting_down.load()) throw shutting_down_error;
      throw bad_request("'" + std::string(q.tei ? "texts" : "documents") + "' item " + std::to_string(i) +
                        " with the query: " + refusal(e));
    }
  }

  // A client that hangs up while its documents are scored cancels them.
  const std::optional<std::vector<Completion>> done = await_completions(handles, req.client_gone);
  if (!done) return HttpResponse::json(499, dump_json(ApiError(499, "the client closed the connection").body()));
  std::vector<float> scores;
  scores.reserve(done->size());
  int64_t prompt_tokens = 0;
  for (const Completion& c : *done) {
    if (c.finish_reason == FinishReason::Cancelled) throw shutting_down_error;
    if (c.finish_reason == FinishReason::Error || c.embedding.empty()) {
      throw ApiError(500, c.error.empty() ? "the score was not computed" : c.error, "server_error");
    }
    prompt_tokens += c.prompt_tokens;
    scores.push_back(c.embedding[0]);
  }
  return HttpResponse::json(200, dump_json(rerank_answer(q, scores, prompt_tokens, id, served.name)));
}

}  // namespace pagoda::server
