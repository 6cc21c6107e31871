// pagoda-server's rerank endpoints (examples/server/rerank_api.*): the body read in llama-server's,
// Jina's, Cohere's and TEI's shapes, the answer sorted and cut as they answer, every bad body a
// 400 naming its fault — all without a model; then the route on an engine: a model that is not
// a reranker is refused by name, and on a random-weight bert reranker the scores are
// Engine::rerank's and the reference encoder's, a pair too long is a 400, a client that hangs up
// cancels the work, shutdown is a 503 and /v1/embeddings refuses the reranker (and a model
// without pooling); a decoder reranker's probabilities are answered as they are.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/embeddings_api.h"
#include "examples/server/rerank_api.h"
#include "engine/model/model.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/test_support.h"
#include "testing/reference_encoder.h"
#include "testing/synth.h"

namespace pagoda::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

RerankQuery parse(const std::string& body) { return parse_rerank_query(ordered_json::parse(body)); }

// The answer to `body` for these scores, as a plain JSON value.
json answer(const std::string& body, const std::vector<float>& scores, int64_t tokens = 7) {
  return json::parse(rerank_answer(parse(body), scores, tokens, "rerank-1", "m").dump());
}

std::vector<size_t> indices(const json& results) {
  std::vector<size_t> out;
  for (const json& r : results) out.push_back(r.at("index").get<size_t>());
  return out;
}

// The 400's message for a body parse_rerank_query refuses ("" if it accepts it).
std::string refusal(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    return e.what();
  }
  return "";
}

TEST(RerankBody, ResultsComeBestFirstWithTiesInDocumentOrder) {
  const json a = answer(R"({"query": "q", "documents": ["a", "b", "c", "d", "e"]})", {0.5f, 2.0f, -1.0f, 2.0f, 0.5f});
  EXPECT_EQ(indices(a.at("results")), (std::vector<size_t>{1, 3, 0, 4, 2}));
  EXPECT_FLOAT_EQ(a["results"][0]["relevance_score"].get<float>(), 2.0f);
  EXPECT_FLOAT_EQ(a["results"][4]["relevance_score"].get<float>(), -1.0f);
  EXPECT_FALSE(a["results"][0].contains("document"));
}

TEST(RerankBody, TheAnswerCarriesIdModelObjectAndUsage) {
  const json a = answer(R"({"query": "q", "documents": ["a"]})", {1.0f}, 12);
  EXPECT_EQ(a.at("id"), "rerank-1");
  EXPECT_EQ(a.at("model"), "m");
  EXPECT_EQ(a.at("object"), "list");
  EXPECT_EQ(a.at("usage"), json({{"prompt_tokens", 12}, {"total_tokens", 12}}));
}

TEST(RerankBody, TopNKeepsOnlyTheBestN) {
  const std::vector<float> scores = {0.1f, 0.9f, 0.5f, 0.7f};
  EXPECT_EQ(indices(answer(R"({"query": "q", "documents": ["a", "b", "c", "d"], "top_n": 2})", scores)["results"]),
            (std::vector<size_t>{1, 3}));
  // More than there are documents, or null, is all of them.
  EXPECT_EQ(answer(R"({"query": "q", "documents": ["a", "b", "c", "d"], "top_n": 99})", scores)["results"].size(), 4u);
  EXPECT_EQ(answer(R"({"query": "q", "documents": ["a", "b", "c", "d"], "top_n": null})", scores)["results"].size(),
            4u);
  EXPECT_EQ(parse(R"({"query": "q", "documents": ["a", "b"], "top_n": 18446744073709551615})").top_n, 2u);
}

TEST(RerankBody, ReturnDocumentsGivesEachResultItsText) {
  const json a = answer(R"({"query": "q", "documents": ["low", "high"], "return_documents": true})", {0.0f, 1.0f});
  EXPECT_EQ(a["results"][0]["document"], json({{"text", "high"}}));
  EXPECT_EQ(a["results"][1]["document"], json({{"text", "low"}}));
}

TEST(RerankBody, DocumentsMayBeObjectsWithTextAsCohereAndJinaSendThem) {
  const RerankQuery q = parse(R"({"query": "q", "documents": [{"text": "one", "id": 7}, "two", {"text": ""}]})");
  EXPECT_EQ(q.documents, (std::vector<std::string>{"one", "two", ""}));
  EXPECT_FALSE(q.tei);
  const json a = answer(R"({"query": "q", "documents": [{"text": "one"}], "return_documents": true})", {0.0f});
  EXPECT_EQ(a["results"][0]["document"], json({{"text", "one"}}));
}

TEST(RerankBody, ANanScoreRanksBelowEveryOther) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const json a = answer(R"({"query": "q", "documents": ["a", "b", "c", "d"]})", {nan, -inf, 3.0f, nan});
  EXPECT_EQ(indices(a["results"]), (std::vector<size_t>{2, 0, 1, 3}));
}

TEST(RerankBody, TeisShapeAnswersABareArrayOfScoresThroughASigmoid) {
  const RerankQuery q = parse(R"({"query": "q", "texts": ["a", "b"]})");
  EXPECT_TRUE(q.tei);
  EXPECT_TRUE(q.sigmoid);
  const json a = answer(R"({"query": "q", "texts": ["a", "b"]})", {0.0f, 2.0f});
  ASSERT_TRUE(a.is_array());
  EXPECT_EQ(indices(a), (std::vector<size_t>{1, 0}));
  EXPECT_NEAR(a[0]["score"].get<double>(), 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(a[1]["score"].get<double>(), 0.5, 1e-6);
  EXPECT_FALSE(a[0].contains("relevance_score"));
  EXPECT_FALSE(a[0].contains("text"));
}

TEST(RerankBody, TeisRawScoresAndReturnTextAreHonoured) {
  const json a =
      answer(R"({"query": "q", "texts": ["a", "b"], "raw_scores": true, "return_text": true})", {-3.0f, 2.0f});
  ASSERT_TRUE(a.is_array());
  EXPECT_FLOAT_EQ(a[0]["score"].get<float>(), 2.0f);
  EXPECT_FLOAT_EQ(a[1]["score"].get<float>(), -3.0f);
  EXPECT_EQ(a[0]["text"], "b");
  EXPECT_EQ(a[1]["text"], "a");
  EXPECT_EQ(indices(answer(R"({"query": "q", "texts": ["a", "b", "c"], "top_n": 1})", {0.0f, 0.0f, 1.0f})),
            (std::vector<size_t>{2}));
}

TEST(RerankBody, EveryBadBodyIsA400NamingItsFault) {
  std::string too_many = R"({"query": "q", "documents": [)";
  for (size_t i = 0; i <= kMaxRerankDocuments; ++i) too_many += i ? ",\"d\"" : "\"d\"";
  too_many += "]}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1, 2])", "must be a JSON object"},
      {R"({"documents": ["a"]})", "'query' is required"},
      {R"({"query": null, "documents": ["a"]})", "'query' is required"},
      {R"({"query": 5, "documents": ["a"]})", "'query' must be a string"},
      {R"({"query": "", "documents": ["a"]})", "'query' must not be empty"},
      {R"({"query": "q"})", "'documents' is required"},
      {R"({"query": "q", "documents": "a"})", "'documents' must be a list"},
      {R"({"query": "q", "documents": []})", "'documents' must not be an empty list"},
      {R"({"query": "q", "documents": ["a", 5]})",
       "'documents' item 1 must be a string or an object with a string 'text'"},
      {R"({"query": "q", "documents": [{"image": "x.png"}]})", "'documents' item 0 must be"},
      {R"({"query": "q", "documents": [{"text": 5}]})", "'documents' item 0 must be"},
      {R"({"query": "q", "documents": [["a"]]})", "'documents' item 0 must be"},
      {R"({"query": "q", "texts": [{"text": "a"}]})", "'texts' item 0 must be a string"},
      {R"({"query": "q", "texts": []})", "'texts' must not be an empty list"},
      {R"({"query": "q", "documents": ["a"], "texts": ["b"]})", "not both"},
      {too_many, "at most 2048"},
      {R"({"query": "q", "documents": ["a"], "top_n": 0})", "'top_n' must be a positive integer"},
      {R"({"query": "q", "documents": ["a"], "top_n": -3})", "'top_n' must be a positive integer"},
      {R"({"query": "q", "documents": ["a"], "top_n": 1.5})", "'top_n' must be a positive integer"},
      {R"({"query": "q", "documents": ["a"], "top_n": "2"})", "'top_n' must be a positive integer"},
      {R"({"query": "q", "documents": ["a"], "top_n": true})", "'top_n' must be a positive integer"},
      {R"({"query": "q", "documents": ["a"], "return_documents": "yes"})", "'return_documents' must be true or false"},
      {R"({"query": "q", "texts": ["a"], "return_text": 1})", "'return_text' must be true or false"},
      {R"({"query": "q", "texts": ["a"], "raw_scores": "no"})", "'raw_scores' must be true or false"},
      {R"({"query": "q", "texts": ["a"], "truncate": 1})", "'truncate' must be true or false"},
      {R"({"query": "q", "texts": ["a"], "truncation_direction": "Left"})", "'truncation_direction' may only be"},
  };
  for (const auto& [body, message] : cases) {
    const std::string why = refusal(body);
    EXPECT_NE(why.find(message), std::string::npos) << body.substr(0, 80) << " gave: " << why;
  }
  EXPECT_EQ(refusal(R"({"query": "q", "documents": ["a"], "top_n": 1, "return_documents": false})"), "");
  EXPECT_EQ(refusal(R"({"query": "q", "texts": ["a"], "truncate": true, "truncation_direction": "Right"})"), "");
}

// --- The route on an engine ---------------------------------------------------------------

struct Call {
  int status = 0;
  json body;
};

Call call(HttpResponse (*route)(const HttpRequest&, Engine&, const ModelNames&, const std::atomic<bool>&,
                                const std::string&),
          Engine& engine, const std::string& body, std::function<bool()> client_gone = {}) {
  const ModelNames names("test-model");
  const std::atomic<bool> shutting_down{false};
  HttpRequest req{.method = "POST", .path = "/v1/rerank", .body = body, .client_gone = std::move(client_gone)};
  try {
    const HttpResponse res = route(req, engine, names, shutting_down, "rerank-1");
    return {res.status, json::parse(res.body)};
  } catch (const ApiError& e) {
    return {e.status(), e.body()};
  }
}

Call post_rerank(Engine& engine, const json& body, std::function<bool()> client_gone = {}) {
  return call(&rerank, engine, body.dump(), std::move(client_gone));
}

std::string message(const Call& c) { return c.body.at("error").at("message").get<std::string>(); }

// expect_engine_idle once nothing runs or waits: a request cancelled as the route gave up is
// retired by the engine a moment later.
void expect_idle_soon(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (EngineMetrics m = engine.metrics();
       (m.running != 0 || m.queued != 0) && std::chrono::steady_clock::now() < deadline; m = engine.metrics()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  test::expect_engine_idle(engine);
}

TEST(RerankRoute, AModelThatIsNotARerankerIsA400SayingSo) {
  EngineConfig config;
  config.model_path = test::tiny_gqa_model();
  config.threads = 1;
  Engine engine(config);
  const Call c = post_rerank(engine, {{"query", "q"}, {"documents", {"a", "b"}}});
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(message(c).find("not a reranker"), std::string::npos) << message(c);
  // A bad body is named first, whatever the model.
  EXPECT_NE(message(post_rerank(engine, {{"query", ""}, {"documents", {"a"}}})).find("'query'"), std::string::npos);
  test::expect_engine_idle(engine);
}

ModelConfig bert_reranker_config() {
  ModelConfig c;
  c.arch = Architecture::Bert;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 4, c.ffn_dim = 128;
  c.vocab_size = 600, c.context_length = 64, c.norm_eps = 1e-12f, c.pooling_type = 4;  // rank
  return c;
}

// An engine on a random-weight bert reranker.
std::unique_ptr<Engine> reranker_engine() {
  EngineConfig config;
  config.model_path = test::synth_model_once("bert-rank.gguf", bert_reranker_config(), 11);
  config.threads = 1;
  return std::make_unique<Engine>(config);
}

const std::vector<std::string> kDocuments = {"the cat sat on the mat", "a dog ran", "", "cats and dogs and mats",
                                             "zebra"};

TEST(RerankRoute, ScoresAreEngineReranksAndTheReferenceEncodersSortedBestFirst) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  const std::string query = "where did the cat sit";
  const std::vector<float> want = engine->rerank(query, kDocuments);
  const Call c = post_rerank(*engine, {{"query", query}, {"documents", kDocuments}, {"return_documents", true}});
  ASSERT_EQ(c.status, 200) << c.body.dump();
  const json& results = c.body.at("results");
  ASSERT_EQ(results.size(), kDocuments.size());
  int64_t tokens = 0;
  for (const std::string& d : kDocuments) tokens += int64_t(engine->rerank_tokens(query, d).size());
  EXPECT_EQ(c.body["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(c.body["model"], "test-model");

  const Model model = load_model(test::synth_model_once("bert-rank.gguf", bert_reranker_config(), 11));
  const ReferenceEncoder reference(model);
  for (size_t k = 0; k < results.size(); ++k) {
    const size_t i = results[k]["index"].get<size_t>();
    const float score = results[k]["relevance_score"].get<float>();
    EXPECT_EQ(score, want[i]) << "document " << i;  // the same requests, batched alike: bit for bit
    EXPECT_EQ(results[k]["document"]["text"], kDocuments[i]);
    if (k > 0) {
      EXPECT_GE(results[k - 1]["relevance_score"].get<float>(), score);
    }
    const std::vector<int32_t> ids = engine->rerank_tokens(query, kDocuments[i]);
    const float oracle = reference.embed(ids, EncoderPooling::Rank).at(0);
    EXPECT_NEAR(score, oracle, 1e-3 * std::max(1.0f, std::abs(oracle))) << "document " << i;
  }
  // top_n keeps the best of the same order.
  const Call top = post_rerank(*engine, {{"query", query}, {"documents", kDocuments}, {"top_n", 2}});
  ASSERT_EQ(top.status, 200);
  ASSERT_EQ(top.body["results"].size(), 2u);
  EXPECT_EQ(top.body["results"][0],
            json({{"index", results[0]["index"]}, {"relevance_score", results[0]["relevance_score"]}}));
  expect_idle_soon(*engine);
}

TEST(RerankRoute, APairLongerThanTheContextIsA400NamingTheDocument) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  std::string long_document;
  for (int i = 0; i < 200; ++i) long_document += "word ";
  const Call c = post_rerank(*engine, {{"query", "q"}, {"documents", {"short", long_document}}});
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(message(c).find("'documents' item 1"), std::string::npos) << message(c);
  EXPECT_NE(message(c).find("context length"), std::string::npos) << message(c);
  expect_idle_soon(*engine);
}

TEST(RerankRoute, TruncateCutsALongPairToTheContextInsteadOfRefusingIt) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  std::string long_document;
  for (int i = 0; i < 200; ++i) long_document += "word ";
  const Call c = post_rerank(*engine, {{"query", "q"}, {"documents", {"short", long_document}}, {"truncate", true}});
  ASSERT_EQ(c.status, 200) << c.body.dump();
  EXPECT_EQ(c.body["results"].size(), 2u);
  // The long pair counts the context's tokens, no more.
  const int64_t short_pair = int64_t(engine->rerank_tokens("q", "short").size());
  EXPECT_EQ(c.body["usage"]["prompt_tokens"], short_pair + engine->context_length());
  expect_idle_soon(*engine);
}

TEST(RerankRoute, AClientThatHangsUpCancelsTheScoring) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  // Enough pairs that scoring outlasts the route's first look at the client (100 ms), each
  // within the context.
  std::string document;
  for (int i = 0; engine->rerank_tokens("q", document).size() < 56; ++i) document += "word" + std::to_string(i) + " ";
  const Call c =
      post_rerank(*engine, {{"query", "q"}, {"documents", std::vector<std::string>(kMaxRerankDocuments, document)}},
                  [] { return true; });
  EXPECT_EQ(c.status, 499);
  expect_idle_soon(*engine);
}

TEST(RerankRoute, EmbeddingsOnARerankerIsA400PointingToRerank) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  const Call c = call([](const HttpRequest& req, Engine& e, const ModelNames& names, const std::atomic<bool>& down,
                         const std::string&) { return embeddings(req, e, names, down); },
                      *engine, R"({"input": "hello"})");
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(message(c).find("reranker"), std::string::npos) << message(c);
  EXPECT_NE(message(c).find("/v1/rerank"), std::string::npos) << message(c);
}

// llama-server's answer too: OpenAI's embeddings have no place for one vector per token.
TEST(RerankRoute, EmbeddingsOnAModelWhosePoolingIsNoneIsA400SayingSo) {
  ModelConfig config = test::tiny_gqa_config();
  config.pooling_type = 0;
  EngineConfig engine_config;
  engine_config.model_path = test::synth_model_once("pooling-none.gguf", config, 7);
  engine_config.threads = 1;
  Engine engine(engine_config);
  const Call c = call([](const HttpRequest& req, Engine& e, const ModelNames& names, const std::atomic<bool>& down,
                         const std::string&) { return embeddings(req, e, names, down); },
                      engine, R"({"input": "hello"})");
  EXPECT_EQ(c.status, 400);
  EXPECT_NE(message(c).find("pooling is none"), std::string::npos) << message(c);
  test::expect_engine_idle(engine);
}

TEST(RerankRoute, AShutDownEngineIsA503) {
  const std::unique_ptr<Engine> engine = reranker_engine();
  engine->shutdown();
  const ModelNames names("test-model");
  const std::atomic<bool> shutting_down{true};
  HttpRequest req{.method = "POST", .path = "/v1/rerank", .body = R"({"query": "q", "documents": ["a"]})"};
  try {
    rerank(req, *engine, names, shutting_down, "rerank-1");
    FAIL() << "a shut-down engine answered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503) << e.what();
  }
}

// Qwen3-Reranker's scores are P("yes") already: every shape answers them as they are, TEI's
// included (its sigmoid is for an encoder's logits), and they are Engine::rerank's.
TEST(RerankRoute, ADecoderRerankersProbabilitiesAreAnsweredAsTheyAreInEveryShape) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  const std::string path = test::scratch_path("qwen3-rerank.gguf");
  ModelConfig c;
  c.arch = Architecture::Qwen3;
  c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_dim = 128, c.context_length = 256;
  c.rope_theta = 1e6f, c.norm_eps = 1e-6f, c.pooling_type = 4;
  write_synth_model(path, {.config = c, .seed = 5, .tied_output = true, .vocab_path = vocab});
  EngineConfig config;
  config.model_path = path;
  config.threads = 1;
  Engine engine(config);
  const std::string query = "where did the cat sit";
  const std::vector<float> want = engine.rerank(query, kDocuments);
  for (const char* field : {"documents", "texts"}) {
    const Call call = post_rerank(engine, {{"query", query}, {field, kDocuments}});
    ASSERT_EQ(call.status, 200) << call.body.dump();
    const json& results = std::string(field) == "texts" ? call.body : call.body.at("results");
    ASSERT_EQ(results.size(), kDocuments.size());
    for (const json& r : results) {
      const float score = r.at(std::string(field) == "texts" ? "score" : "relevance_score").get<float>();
      EXPECT_EQ(score, want.at(r.at("index").get<size_t>())) << field;
      EXPECT_GT(score, 0.0f);
      EXPECT_LT(score, 1.0f);
    }
  }
  expect_idle_soon(engine);
}

}  // namespace
}  // namespace pagoda::server
